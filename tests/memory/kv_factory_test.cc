// Building stores from YAML: sizing, defaults and errors with file:line:col.
#include <catch2/catch.hpp>

#include "core/config_node.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "models/memory/gpu_memory_pool.h"
#include "models/memory/kv_capabilities.h"
#include "models/memory/kv_store.h"

using namespace kvsim;
using Catch::Matchers::Contains;

namespace {
std::unique_ptr<KvStore> build(const std::string& yaml, const KvBudget& b) {
  const ModelSpec& m = Catalog::builtin().model("llama-3-8b");
  const GpuSpec& g = Catalog::builtin().gpu("a100-sxm4-80gb");
  return make_kv_store(ConfigNode::parse_string(yaml, "kv.yaml"), m, g, b);
}
KvBudget budget() {
  KvBudget b;
  b.capacity_bytes = int64_t{80} << 30;
  b.context_bytes = int64_t{1} << 30;
  b.weights_bytes = int64_t{16} << 30;
  b.workspace_bytes = int64_t{1} << 30;
  b.activation_peak_bytes = int64_t{2} << 30;
  return b;
}
}  // namespace

TEST_CASE("paged store is sized vLLM-style from gpu_memory_utilization", "[memory][config]") {
  // 80 GiB x 0.9 = 72 GiB; minus 20 GiB of non-KV = 52 GiB; 2 MiB blocks -> 26,624, of which
  // vLLM keeps one as its null block: 26,623 usable.
  auto s = build("{type: paged}", budget());
  CHECK(s->type() == "paged");
  REQUIRE(s->paged() != nullptr);
  CHECK(s->paged()->block_tokens() == 16);
  CHECK(s->paged()->total_blocks() == 26'623);
  CHECK(s->preallocated());
  CHECK(s->deferred_growth() != nullptr);
  CHECK(s->caching_allocator() == nullptr);
  auto half = build("{type: paged, gpu_memory_utilization: 0.5, block_size: 32}", budget());
  CHECK(half->paged()->total_blocks() == (40 - 20) * 1024 / 4 - 1);
  // An explicit num_blocks is the usable pool.
  auto fixed = build("{type: paged, num_blocks: 100}", budget());
  CHECK(fixed->paged()->total_blocks() == 100);
}

TEST_CASE("contiguous and caching stores read their parameters", "[memory][config]") {
  auto c = build("{type: contiguous, reserve: pow2, fit: best}", budget());
  CHECK(c->type() == "contiguous");
  CHECK(c->usage().capacity_bytes == int64_t{52} << 30);
  CHECK(c->preallocated());
  CHECK(c->paged() == nullptr);
  CHECK(c->deferred_growth() == nullptr);
  CHECK(c->caching_allocator() == nullptr);
  auto a = build("{type: caching_allocator, growth: chunked, chunk_tokens: 128}", budget());
  CHECK(a->type() == "caching_allocator");
  REQUIRE(a->allocate(1, 100, 1000));
  CHECK(a->tokens_until_growth_allocates(1) == 28);
  CHECK(!a->preallocated());
  CHECK(a->paged() == nullptr);
  CHECK(a->deferred_growth() == nullptr);
  REQUIRE(a->caching_allocator() != nullptr);
  CHECK(a->caching_allocator()->device_limit_bytes() == int64_t{62} << 30);
}

TEST_CASE("bad kv nodes are ConfigErrors with file:line:col", "[memory][config]") {
  CHECK_THROWS_WITH(build("type: paged\nblok_size: 16\n", budget()),
                    Contains("kv.yaml:2:1") && Contains("unknown key 'blok_size'") &&
                        Contains("did you mean 'block_size'?"));
  CHECK_THROWS_WITH(build("{type: paged, block_size: 0}", budget()), Contains("kv.yaml:1:27"));
  CHECK_THROWS_WITH(build("{type: pagd}", budget()), Contains("did you mean 'paged'?"));
  CHECK_THROWS_WITH(build("{type: contiguous, reserve: maxlen}", budget()),
                    Contains("did you mean 'max_len'?"));
  CHECK_THROWS_WITH(build("{type: paged, num_blocks: 10, gpu_memory_utilization: 0.8}", budget()),
                    Contains("not both"));
  CHECK_THROWS_WITH(build("{type: paged, num_blocks: 1000000}", budget()), Contains("do not fit"));
  CHECK_THROWS_WITH(build("{type: paged, gpu_memory_utilization: 0.2}", budget()),
                    Contains("no room for the paged KV pool"));
  CHECK_THROWS_WITH(build("{type: caching_allocator, max_split_size_mb: 20}", budget()),
                    Contains("> 20"));
  CHECK_THROWS_AS(build("[1, 2]", budget()), ConfigError);
}
