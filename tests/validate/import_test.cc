// `kvsim-validate import vidur`: Vidur's mlp.csv columns become harness cases that the latency
// model predicts with the same operations it costs in a forward pass.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <fstream>
#include <string>

#include "core/errors.h"
#include "tests/validate/shell.h"
#include "validate/commands.h"
#include "validate/measurements.h"

using namespace kvsim;
using namespace kvsim::validate;

namespace {

// A two-model-dim, three-row Vidur file: Llama-2-7B dims (32 heads, hidden 4096, FFN 11008),
// token counts 8, 16 and 16 again (overlapping grids), plus a TP 2 row that is not imported.
std::string vidur_csv() {
  const char* ops[] = {"emb",         "input_layernorm", "attn_pre_proj",
                       "attn_rope",   "attn_post_proj",  "post_attention_layernorm",
                       "mlp_up_proj", "mlp_act",         "mlp_down_proj",
                       "add"};
  std::string h;
  for (const char* op : ops) {
    for (const char* st : {"min", "max", "mean", "median", "std"}) {
      h += std::string("time_stats.") + op + "." + st + ",";
    }
  }
  h += "n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,"
       "num_tensor_parallel_workers\n";
  auto row = [&](double median, int tokens, int tp) {
    std::string r;
    for (int i = 0; i < 10; ++i)
      r += fmt::format("{},{},{},{},0,", median / 2, median * 2, median, median);
    return r + fmt::format("32,32,4096,11008,32000,True,{},{}\n", tokens, tp);
  };
  return h + row(0.010, 8, 1) + row(0.020, 16, 1) + row(0.030, 16, 1) + row(0.5, 8, 2);
}

}  // namespace

TEST_CASE("import vidur maps each operation onto a GEMM or an elementwise copy",
          "[validate][import]") {
  const auto dir = kvsim::test::fresh_dir("kvsim-import");
  const auto a100 = dir / "a100";
  std::filesystem::create_directories(a100);
  std::ofstream(a100 / "mlp.csv") << vidur_csv();
  ImportOptions o;
  o.input = a100;  // a folder: its mlp.csv; the GPU from the path
  o.out_dir = dir / "out";
  o.quiet = true;
  CHECK(run_import_vidur(o) == 20);  // 2 token counts x 10 operations
  const std::vector<Measurement> rows = read_measurements(o.out_dir / "measurements.csv");
  REQUIRE(rows.size() == 20);
  // Token count 8 (train, the first of the sorted counts): attn_pre_proj is m 8, k 4096,
  // n 3 x 4096 = 12288; mlp_up_proj k 4096, n 2 x 11008; mlp_down_proj k 11008, n 4096.
  CHECK(rows[2].c.kind == KernelClass::kGemm);
  CHECK(rows[2].c.gemm.m == 8);
  CHECK(rows[2].c.gemm.n == 12288);
  CHECK(rows[6].c.gemm.n == 22016);
  CHECK(rows[8].c.gemm.k == 11008);
  CHECK(rows[2].c.split == "train");
  CHECK(rows[2].seconds == Approx(10e-6));  // 0.010 ms
  CHECK(rows[2].seconds_p90 == Approx(20e-6));
  // Elementwise: a copy whose 2 x bytes is the traffic, rounded to whole KiB. Norm at 8 tokens:
  // read + write 8 x 4096 x 2 B = 131,072 B of traffic -> a 64 KiB copy. mlp_act: 3 x 8 x 11008
  // x 2 B = 528,384 B -> 264,192 B = 258 KiB exactly; the one residual add: 3 x 8 x 4096 x 2 =
  // 196,608 B -> 96 KiB.
  CHECK(rows[1].c.kind == KernelClass::kMembwCopy);
  CHECK(rows[1].c.bytes == 65536);
  CHECK(rows[7].c.bytes == 264192);
  CHECK(rows[9].c.bytes == 98304);
  // Token count 16 appears twice: its medians are averaged, (0.020 + 0.030) / 2 ms; it is the
  // second count, so held out.
  CHECK(rows[12].seconds == Approx(25e-6));
  CHECK(rows[12].c.split == "test");
  CHECK(manifest_gpu(o.out_dir).name == "a100-sxm4-80gb");
  CHECK(kvsim::test::slurp(o.out_dir / "vidur_ops.csv").find("12,16,attn_pre_proj") !=
        std::string::npos);
}

TEST_CASE("import vidur refuses what it cannot read", "[validate][import]") {
  const auto dir = kvsim::test::fresh_dir("kvsim-import-bad");
  ImportOptions o;
  o.out_dir = dir / "out";
  o.quiet = true;
  o.input = dir / "mlp.csv";
  std::ofstream(o.input) << vidur_csv();
  CHECK_THROWS_WITH(run_import_vidur(o), Catch::Contains("pass --gpu"));  // no GPU in the path
  o.gpu = "h100-sxm";
  o.tp = 4;
  CHECK_THROWS_WITH(run_import_vidur(o),
                    Catch::Contains("no rows with num_tensor_parallel_workers = 4"));
  std::ofstream(o.input) << "a,b\n1,2\n";
  o.tp = 1;
  CHECK_THROWS_WITH(run_import_vidur(o), Catch::Contains("mlp.csv:1: no column 'num_tokens'"));
}
