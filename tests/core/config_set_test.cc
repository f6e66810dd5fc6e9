// Errors in values a --set wrote: they name the --set and the key path. Their line:col would be a
// place in the --set text ("1:1"), which messages labelled with the scenario file's name.
#include <catch2/catch.hpp>

#include <string>

#include "core/config_node.h"
#include "core/config_patch.h"
#include "core/errors.h"

using Catch::Matchers::Equals;
using kvsim::ConfigNode;

namespace {

ConfigNode patched(const std::string& yaml, const std::vector<std::string>& sets) {
  YAML::Node tree = YAML::Load(yaml);
  for (const auto& s : sets) kvsim::apply_set_in_place(tree, s);
  return ConfigNode::wrap_with_sets(tree, "f.yaml", sets);
}

}  // namespace

TEST_CASE("a bad value from --set names the --set and the key", "[core][config][set]") {
  const std::string yaml = "a:\n  b: 1\n  d: 2\nlist:\n  - {x: 1}\n";
  const ConfigNode n = patched(yaml, {"a.b=abc"});
  CHECK_THROWS_WITH(n.child("a").get<int>("b"),
                    Equals("--set a.b=abc: a.b: expected an integer, got \"abc\""));
  // A value the file wrote keeps its place in the file, line 3, column 6: patched in place, the
  // tree keeps its positions (a copy lost them all, and every error read "f.yaml:1:1").
  const ConfigNode m = patched("a:\n  b: 1\n  d: x\n", {"a.b=2"});
  CHECK(m.child("a").get<int>("b") == 2);
  CHECK_THROWS_WITH(m.child("a").get<int>("d"),
                    Equals("f.yaml:3:6: a.d: expected an integer, got \"x\""));
  // Inside a list (the --set's index is the path's [0]), and under a map a --set wrote whole.
  CHECK_THROWS_WITH(patched(yaml, {"list.0.x=zz"}).child("list").at(0).get<int>("x"),
                    Equals("--set list.0.x=zz: list[0].x: expected an integer, got \"zz\""));
  CHECK_THROWS_WITH(
      patched(yaml, {"a={b: -1}"}).child("a").get<int>("b", {.min = 0}),
      Equals("--set a={b: -1}: a.b: expected an integer >= 0 and <= 2147483647, got \"-1\""));
  // The later of two --sets of one key is the one that wrote it.
  CHECK_THROWS_WITH(patched(yaml, {"a.b=q", "a=zz"}).child("a").get<int>("b"),
                    Equals("--set a=zz: a: expected a map, got \"zz\""));
}

TEST_CASE("an unknown key from --set names the --set", "[core][config][set]") {
  const ConfigNode n = patched("a:\n  b: 1\n", {"a.c=1"});
  const ConfigNode a = n.child("a");
  (void)a.get<int>("b");
  CHECK_THROWS_WITH(a.reject_unknown_keys(),
                    Equals("--set a.c=1: a: unknown key 'c'; did you mean 'b'?"));
}

TEST_CASE("echoed values are cut and escaped", "[core][config][echo]") {
  // A 10 MB value was echoed whole by an enum's "got ..." (a 10 MB error line), and bytes that are
  // not UTF-8 went to the terminal raw.
  const std::string big(10'000'000, 'z');
  const ConfigNode n = ConfigNode::parse_string("kind: " + big + "\n", "e.yaml");
  std::string msg;
  try {
    (void)n.get_enum("kind", {"paged", "contiguous"});
  } catch (const kvsim::ConfigError& e) {
    msg = e.what();
  }
  CHECK_THAT(msg, Catch::Contains("got \"" + std::string(40, 'z') + "...\""));
  CHECK(msg.size() < 200);
  YAML::Node raw;
  raw["k2"] = std::string(
      "a\xFF"
      "b");  // not UTF-8
  CHECK_THROWS_WITH(ConfigNode::wrap(raw, "e.yaml").get_enum("k2", {"paged"}),
                    Catch::Contains("got \"a\\xFFb\""));
}

TEST_CASE("a copy wrapped with its original's marks keeps every position and --set",
          "[core][config][set]") {
  // A sweep point or a capacity probe is a copy (YAML::Clone drops every position: its errors
  // read "f.yaml:1:1"); wrap_copy puts back where each value was written.
  const ConfigNode original = patched("a:\n  b: 1\n  d: x\nlist:\n  - {x: 1, y: q}\n", {"a.b=abc"});
  const kvsim::ConfigMarksPtr marks = original.marks();
  YAML::Node copy = YAML::Clone(original.yaml());
  CHECK_THROWS_WITH(ConfigNode::wrap(YAML::Clone(copy), "f.yaml").child("a").get<int>("d"),
                    Equals("f.yaml:1:1: a.d: expected an integer, got \"x\""));  // the lost place
  CHECK_THROWS_WITH(ConfigNode::wrap_copy(copy, marks).child("a").get<int>("d"),
                    Equals("f.yaml:3:6: a.d: expected an integer, got \"x\""));
  CHECK_THROWS_WITH(ConfigNode::wrap_copy(copy, marks).child("a").get<int>("b"),
                    Equals("--set a.b=abc: a.b: expected an integer, got \"abc\""));
  CHECK_THROWS_WITH(ConfigNode::wrap_copy(copy, marks).child("list").at(0).get<int>("y"),
                    Equals("f.yaml:5:15: list[0].y: expected an integer, got \"q\""));
  // An unknown key keeps its key's place.
  const ConfigNode l0 = ConfigNode::wrap_copy(copy, marks).child("list").at(0);
  (void)l0.get<int>("x");
  CHECK_THROWS_WITH(l0.reject_unknown_keys(),
                    Equals("f.yaml:5:12: list[0]: unknown key 'y'; did you mean 'x'?"));
  // What the copy's own patches wrote is named by what the caller says wrote it.
  kvsim::apply_set_in_place(copy, "list.0.x=zz");
  CHECK_THROWS_WITH(
      ConfigNode::wrap_copy(copy, marks, {{ConfigNode::key_path("list.0.x"), "--over list.0.x=zz"}})
          .child("list")
          .at(0)
          .get<int>("x"),
      Equals("--over list.0.x=zz: list[0].x: expected an integer, got \"zz\""));
}
