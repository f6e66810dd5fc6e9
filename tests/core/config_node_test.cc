// ConfigNode: positions, types, bounds, unknown keys, duplicates.
#include <catch2/catch.hpp>

#include "core/config_node.h"
#include "core/errors.h"

#include <fmt/format.h>

using namespace kvsim;
using Catch::Matchers::Contains;

TEST_CASE("config errors name file, line, column, key path and what was expected", "[config]") {
  auto root = ConfigNode::parse_string("a: 1\nguards:\n  - {type: kv, margin: ten}\n", "x.yaml");
  auto g = root.child("guards").at(0);
  CHECK_THROWS_WITH(g.get<double>("margin"),
                    "x.yaml:3:24: guards[0].margin: expected a number, got \"ten\"");
  CHECK(root.get<int>("a") == 1);
}

TEST_CASE("missing keys point at the parent map", "[config]") {
  auto root = ConfigNode::parse_string("engine:\n  kv: {type: paged}\n", "s.yaml");
  CHECK_THROWS_WITH(root.child("engine").child("kv").get<int>("block_size"),
                    "s.yaml:2:7: engine.kv: missing required key 'block_size'");
}

TEST_CASE("bounds and non-finite numbers are rejected", "[config]") {
  auto root = ConfigNode::parse_string("a: -1\nb: .nan\nc: .inf\nd: 2.5\n", "b.yaml");
  CHECK_THROWS_WITH(root.get<double>("a", {.min = 0}),
                    Contains("expected a number >= 0, got \"-1\""));
  CHECK_THROWS_WITH(root.get<double>("b"), Contains("expected a finite number"));
  CHECK_THROWS_WITH(root.get<double>("c"), Contains("expected a finite number"));
  CHECK_THROWS_WITH(root.get<int64_t>("d"), Contains("b.yaml:4:4: d: expected an integer"));
  CHECK(root.get<double>("missing", 7.0) == 7.0);
}

TEST_CASE("unknown keys are errors with a suggestion", "[config]") {
  auto root = ConfigNode::parse_string("safty_margin_gb: 10\n", "g.yaml");
  root.get<double>("safety_margin_gb", 0.0);
  CHECK_THROWS_WITH(root.reject_unknown_keys(),
                    "g.yaml:1:1: unknown key 'safty_margin_gb'; did you mean 'safety_margin_gb'?");
}

TEST_CASE("duplicate keys, syntax errors and deep nesting are rejected at parse", "[config]") {
  CHECK_THROWS_WITH(ConfigNode::parse_string("a: 1\nb: 2\na: 3\n", "d.yaml"),
                    "d.yaml:3:1: duplicate key 'a'");
  CHECK_THROWS_WITH(ConfigNode::parse_string("a: [1, 2\n", "e.yaml"), Contains("e.yaml:"));
  std::string deep = std::string(100, '[') + std::string(100, ']');
  CHECK_THROWS_AS(ConfigNode::parse_string(deep, "n.yaml"), ConfigError);
}

TEST_CASE("enums list their choices and suggest the nearest", "[config]") {
  auto root = ConfigNode::parse_string("on_fail: trunkate\n", "h.yaml");
  CHECK_THROWS_WITH(root.get_enum("on_fail", {"reject", "truncate", "queue"}),
                    "h.yaml:1:10: on_fail: expected one of reject, truncate, queue, got "
                    "\"trunkate\"; did you mean 'truncate'?");
}

TEST_CASE("alias bombs are bounded", "[config]") {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  char prev = 'a';
  for (char c = 'b'; c <= 'k'; ++c) {
    bomb += fmt::format("{}: &{} [*{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}]\n", c, c, prev,
                        prev, prev, prev, prev, prev, prev, prev, prev, prev);
    prev = c;
  }
  CHECK_THROWS_WITH(ConfigNode::parse_string(bomb, "bomb.yaml"), Contains("alias bomb"));
}

TEST_CASE("has() is pure; allow() declares keys; get_optional and typed get_enum read",
          "[config]") {
  // Fails if has() records the key again (the unknown-key error would vanish) or allow() stops
  // declaring keys (the allowed key would be reported unknown).
  auto root = ConfigNode::parse_string("a: 1\nb: 2\nmode: fast\n", "k.yaml");
  CHECK(root.has("a"));
  CHECK_FALSE(root.has("zzz"));
  CHECK(root.get_optional<int>("a") == 1);
  CHECK_FALSE(root.get_optional<int>("c").has_value());
  enum class Mode { kFast, kSlow };
  CHECK(root.get_enum<Mode>("mode", {{"fast", Mode::kFast}, {"slow", Mode::kSlow}}) == Mode::kFast);
  CHECK(root.get_enum<Mode>("other", {{"fast", Mode::kFast}, {"slow", Mode::kSlow}}, Mode::kSlow) ==
        Mode::kSlow);
  CHECK_THROWS_WITH(root.reject_unknown_keys(), Contains("k.yaml:2:1: unknown key 'b'"));
  root.allow({"b"});
  CHECK_NOTHROW(root.reject_unknown_keys());

  auto bad = ConfigNode::parse_string("mode: fats\n", "e.yaml");
  CHECK_THROWS_WITH(bad.get_enum<Mode>("mode", {{"fast", Mode::kFast}, {"slow", Mode::kSlow}}),
                    "e.yaml:1:7: mode: expected one of fast, slow, got \"fats\"; did you mean "
                    "'fast'?");
}

TEST_CASE("merged maps keep every entry's own position and key path", "[config]") {
  // A scenario's engine with one policy's engine on top: errors and unknown
  // keys name the line, column and key path where the user wrote the entry.
  auto root = ConfigNode::parse_string(
      "engine:\n"
      "  max_num_seqs: -3\n"
      "  kv: {type: paged, block_size: 16}\n"
      "  workspace_gb: 1\n"
      "policies:\n"
      "  - name: a\n"
      "    engine: {kv: {type: paged, block_sise: 16}, swap_space_gb: x, prefil: 1}\n",
      "m.yaml");
  const ConfigNode policy = root.child("policies").at(0);
  auto base = root.peek("engine");
  auto over = policy.peek("engine");
  REQUIRE(base);
  REQUIRE(over);
  const ConfigNode merged = ConfigNode::merge({*base, *over}, policy);
  CHECK(merged.where() == "m.yaml:7:13");
  CHECK(merged.path() == "policies[0].engine");
  CHECK_THROWS_WITH(merged.get<int64_t>("max_num_seqs", {.min = 1}),
                    "m.yaml:2:17: engine.max_num_seqs: expected an integer >= 1, got \"-3\"");
  CHECK_THROWS_WITH(merged.get<double>("swap_space_gb"),
                    "m.yaml:7:64: policies[0].engine.swap_space_gb: expected a number, got \"x\"");
  CHECK(merged.get<double>("workspace_gb") == 1.0);
  const ConfigNode kv = merged.child("kv");  // the policy's, replacing the scenario's whole
  CHECK(kv.path() == "policies[0].engine.kv");
  CHECK(kv.get<std::string>("type") == "paged");
  CHECK_THROWS_WITH(merged.reject_unknown_keys(),
                    "m.yaml:7:67: policies[0].engine: unknown key 'prefil'");
  merged.allow({"prefil", "max_num_seqs", "swap_space_gb"});
  CHECK_THROWS_WITH(merged.reject_unknown_keys(),
                    "m.yaml:7:32: policies[0].engine.kv: unknown key 'block_sise'");
  // peek() neither reads the key nor makes the child one the original checks.
  root.allow({"policies"});
  policy.allow({"name", "engine"});
  CHECK_THROWS_WITH(root.reject_unknown_keys(), "m.yaml:1:1: unknown key 'engine'");
  root.allow({"engine"});
  CHECK_NOTHROW(root.reject_unknown_keys());
}

TEST_CASE("a merge of no maps is an empty map at the fallback's position", "[config]") {
  auto root = ConfigNode::parse_string("policies:\n  - {name: a}\n", "e.yaml");
  const ConfigNode policy = root.child("policies").at(0);
  const ConfigNode merged = ConfigNode::merge({}, policy);
  CHECK(merged.is_map());
  CHECK(merged.size() == 0);
  CHECK(merged.where() == "e.yaml:2:5");
  CHECK(merged.line() == 2);
}
