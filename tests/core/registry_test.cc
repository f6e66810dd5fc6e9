// Registry: registration order, duplicates refused, `type:` lookup with position and hint.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <stdexcept>

#include "core/config_node.h"
#include "core/errors.h"
#include "core/registry.h"

using namespace kvsim;

namespace {
struct Shape {
  virtual ~Shape() = default;
  virtual int sides() const = 0;
};
struct Square : Shape {
  int sides() const override { return 4; }
};
struct Triangle : Shape {
  int sides() const override { return 3; }
};
using ShapeFactory = std::function<std::unique_ptr<Shape>(const ConfigNode&)>;

Registry<ShapeFactory> shapes() {
  Registry<ShapeFactory> r("shape");
  r.add({"square", "four sides", {"side"}, [](const ConfigNode&) {
           return std::make_unique<Square>();
         }});
  r.add({"triangle", "three sides", {}, [](const ConfigNode&) {
           return std::make_unique<Triangle>();
         }});
  return r;
}
}  // namespace

TEST_CASE("a registry keeps its names in registration order and refuses duplicates", "[core]") {
  auto r = shapes();
  CHECK(r.names() == std::vector<std::string>{"square", "triangle"});
  CHECK(r.find("triangle")->description == "three sides");
  CHECK(r.find("circle") == nullptr);
  CHECK_THROWS_AS(r.add({"square", "again", {}, nullptr}), std::logic_error);
  CHECK_THROWS_AS(r.add({"", "nameless", {}, nullptr}), std::logic_error);
}

TEST_CASE("a registry chooses by type: and names a wrong one at its position", "[core]") {
  auto r = shapes();
  auto node = ConfigNode::parse_string("a: 1\nshape: {type: triangle}\n", "s.yaml").child("shape");
  CHECK(r.choose(node).make(node)->sides() == 3);
  auto bad = ConfigNode::parse_string("shape:\n  type: sqare\n", "s.yaml").child("shape");
  try {
    r.choose(bad);
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()) ==
          "s.yaml:2:9: shape.type: expected one of square, triangle, got \"sqare\"; did you mean "
          "'square'?");
  }
  auto absent = ConfigNode::parse_string("shape: {}\n", "s.yaml").child("shape");
  CHECK(r.choose(absent, "type", "square").name == "square");
}
