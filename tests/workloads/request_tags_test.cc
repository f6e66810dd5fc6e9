// Per-request priority and max_queue_time_s: from the normalized CSV's
// optional columns and from generated workloads' keys (bursts may set their own).
#include <catch2/catch.hpp>

#include "core/config_node.h"
#include "core/errors.h"
#include "core/fnv1a.h"
#include "tests/workloads/test_util.h"
#include "workloads/traces/trace_reader.h"
#include "workloads/workload.h"

using namespace kvsim;
using kvsim::test::drain;
using kvsim::test::temp_file;

namespace {

std::vector<RequestSpec> read_trace(const std::string& body) {
  TraceOptions o;
  o.path = temp_file("tags.csv", body);
  auto s = open_trace(o);
  return drain(*s);
}

std::string trace_error(const std::string& body) {
  try {
    read_trace(body);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("normalized CSV: optional priority and max_queue_time_s columns", "[trace][tags]") {
  // Any column order; an empty cell means not given (priority 0, no deadline).
  auto v = read_trace(
      "arrival_s,priority,prompt_tokens,output_tokens,max_queue_time_s\n"
      "0.0,2,100,10,2.5\n"
      "0.5,-1,200,20,\n"
      "1.0,,300,30,0.000000001\n");
  REQUIRE(v.size() == 3);
  CHECK(v[0].priority == 2);
  CHECK(v[0].max_queue_time == std::optional<SimTime>(2'500'000'000));
  CHECK(v[1].priority == -1);
  CHECK(!v[1].max_queue_time);
  CHECK(v[2].priority == 0);
  CHECK(v[2].max_queue_time == std::optional<SimTime>(1));
  // Without the columns: priority 0, no deadline.
  auto plain = read_trace("arrival_s,prompt_tokens,output_tokens\n0.0,100,10\n");
  REQUIRE(plain.size() == 1);
  CHECK(plain[0].priority == 0);
  CHECK(!plain[0].max_queue_time);
}

TEST_CASE("normalized CSV: bad priority / max_queue_time_s give the line error", "[trace][tags]") {
  const std::string head = "arrival_s,prompt_tokens,output_tokens,priority,max_queue_time_s\n";
  CHECK_THAT(trace_error(head + "0.0,100,10,1,1\n0.5,200,20,high,\n"),
             Catch::Matchers::EndsWith(":3: priority: expected an integer, got 'high'"));
  CHECK_THAT(
      trace_error(head + "0.0,100,10,1,0\n"),
      Catch::Matchers::EndsWith(":2: max_queue_time_s: expected a number of seconds > 0, got '0'"));
  CHECK_THAT(trace_error(head + "0.0,100,10,1,-3\n"),
             Catch::Matchers::EndsWith(
                 ":2: max_queue_time_s: expected a number of seconds > 0, got '-3'"));
}

TEST_CASE("generated workloads stamp priority and max_queue_time_s; bursts may override",
          "[workload][tags]") {
  auto root = ConfigNode::parse_string(
      "workload:\n"
      "  arrivals: {type: fixed, rate: 1}\n"
      "  prompt_tokens: 100\n"
      "  output_tokens: 10\n"
      "  duration_s: 3\n"
      "  priority: 5\n"
      "  max_queue_time_s: 2\n"
      "  bursts: [{at_s: 1.5, count: 1, prompt_tokens: 8, output_tokens: 1, priority: -1},\n"
      "           {at_s: 2.5, count: 1, prompt_tokens: 8, output_tokens: 1, max_queue_time_s: "
      "0.25}]\n",
      "w.yaml");
  Workload w = make_workload(root.child("workload"), 1);
  auto v = drain(*w.source);
  // Base arrivals at 1 and 2 s; the bursts at 1.5 and 2.5 s.
  REQUIRE(v.size() == 4);
  CHECK(v[0].priority == 5);
  CHECK(v[0].max_queue_time == std::optional<SimTime>(2'000'000'000));
  CHECK(v[1].priority == -1);                                           // its own
  CHECK(v[1].max_queue_time == std::optional<SimTime>(2'000'000'000));  // the workload's
  CHECK(v[2].priority == 5);
  CHECK(v[3].priority == 5);
  CHECK(v[3].max_queue_time == std::optional<SimTime>(250'000'000));
  // Closed-loop clients too.
  auto cl = ConfigNode::parse_string(
      "workload:\n  clients: {type: closed_loop, count: 1}\n  prompt_tokens: 1\n  output_tokens: "
      "1\n"
      "  max_requests: 1\n  priority: 3\n  max_queue_time_s: 1.5\n",
      "w.yaml");
  Workload c = make_workload(cl.child("workload"), 1);
  const RequestSpec r = c.clients->first_request(0);
  CHECK(r.priority == 3);
  CHECK(r.max_queue_time == std::optional<SimTime>(1'500'000'000));
  // max_queue_time_s must be > 0: the error at the value.
  auto bad = ConfigNode::parse_string(
      "workload:\n  arrivals: {type: fixed, rate: 1}\n  prompt_tokens: 1\n  output_tokens: 1\n"
      "  duration_s: 1\n  max_queue_time_s: 0\n",
      "w.yaml");
  CHECK_THROWS_WITH(make_workload(bad.child("workload"), 1),
                    Catch::Matchers::StartsWith("w.yaml:6:21: "));
}

// The optional session_id column (docs/cluster.md's session_affinity router): any text, hashed
// (FNV-1a of the trimmed cell); equal text, equal id; an empty cell or no column: no session.
TEST_CASE("normalized CSV: optional session_id column", "[trace][tags]") {
  auto v = read_trace(
      "arrival_s,prompt_tokens,output_tokens,session_id\n"
      "0.0,100,10,conv-a\n"
      "0.5,200,20,\n"
      "1.0,300,30, conv-a \n"
      "1.5,400,40,conv-b\n");
  REQUIRE(v.size() == 4);
  REQUIRE(v[0].session_id);
  CHECK(*v[0].session_id == fnv1a64("conv-a"));
  CHECK(!v[1].session_id);
  REQUIRE(v[2].session_id);
  CHECK(*v[2].session_id == *v[0].session_id);
  REQUIRE(v[3].session_id);
  CHECK(*v[3].session_id != *v[0].session_id);
  auto plain = read_trace("arrival_s,prompt_tokens,output_tokens\n0.0,100,10\n");
  CHECK(!plain.at(0).session_id);
}

// acceptance_rate is a fraction in [0, 1]; "-0" (numpy's rounded negative) is 0, not a refusal,
// and a real negative still gives the line's error.
TEST_CASE("normalized CSV: an acceptance_rate of -0 reads as 0", "[trace][tags]") {
  auto v = read_trace(
      "arrival_s,prompt_tokens,output_tokens,acceptance_rate\n"
      "0.0,100,10,-0\n"
      "0.5,100,10,-0.000\n"
      "1.0,100,10,0.25\n");
  REQUIRE(v.size() == 3);
  CHECK(v[0].acceptance_rate() == std::optional<double>(0.0));
  CHECK(v[1].acceptance_rate() == std::optional<double>(0.0));
  CHECK(v[2].acceptance_rate() == std::optional<double>(0.25));
  const std::string err =
      trace_error("arrival_s,prompt_tokens,output_tokens,acceptance_rate\n0.0,100,10,-0.5\n");
  CHECK(err.find(":2: acceptance_rate: expected a number from 0 to 1") != std::string::npos);
}
