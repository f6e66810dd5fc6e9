// kvsim-validate: runs real kernels (or their CPU implementations), measures them, fits the
// latency model's profile and reports the simulator's error on held-out shapes.
//   measure --grid G.yaml --backend cpu|cuda -o DIR   memprobe --backend cpu|cuda -o DIR
//   calibrate DIR -o profile.yaml                     compare DIR --profile profile.yaml
//   device [--json] [-o FILE]                         import vidur mlp.csv -o DIR
//   profile --gpu NAME [--attention-kernel fa2|fa3] -o profile.yaml
//   replay SCENARIO --backend cpu|cuda -o DIR [--profile P] [--repeats K] [--threads N] [--seed S]
//   e2e SCENARIO --backend cpu|cuda -o DIR [--repeats K] [--threads N]
//   import llmservingsim PERF_DIR -o DIR [--tp N] [--gpu NAME] [--model M]
//   vllm-run RUN_DIR|BENCH.json --gpu NAME [--model M] [--profile P.yaml] [--p2p auto|on|off] -o
//   OUT
// Exit codes: 0 ok, 1 a correctness check failed (device: no usable CUDA device), 2 bad input,
// 3 internal invariant, 4 other (CUDA errors included).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "apps/cli_main.h"
#include "core/atomic_file.h"
#include "core/data_path.h"
#include "core/errors.h"
#include "core/stop_signals.h"
#include "models/catalog.h"
#include "models/latency/profile.h"
#include "validate/backend.h"
#include "validate/commands.h"
#include "validate/replay/e2e.h"
#include "validate/replay/replay.h"
#include "validate/scratch_folder.h"
#include "validate/vllm_run/import_llmservingsim.h"
#include "validate/vllm_run/vllm_run.h"

namespace {

using namespace kvsim::validate;

// An output path too long for the stop handler's table of temporaries (core/atomic_file.h) is
// refused while the command line is read, before anything is written.
CLI::Validator output_path_check(void (*check)(const std::filesystem::path&), const char* name) {
  return CLI::Validator(
      [check](std::string& path) -> std::string {
        try {
          check(path);
        } catch (const kvsim::InputError& e) {
          return e.what();
        }
        return "";
      },
      "", name);
}
CLI::Validator output_folder() {
  return output_path_check(kvsim::check_output_folder, "output folder");
}
CLI::Validator output_file() { return output_path_check(kvsim::check_output_path, "output file"); }

void add_commands(CLI::App& app, int& exit_code) {
  auto mo = std::make_shared<MeasureOptions>();
  CLI::App* m = app.add_subcommand("measure", "check and time every case of a grid");
  m->add_option("--grid", mo->grid, "grid YAML (validate/grids/*.yaml)")
      ->required()
      ->check(CLI::ExistingFile);
  m->add_option("--backend", mo->backend, backend_names())
      ->check(CLI::IsMember(backend_registry().names()))
      ->capture_default_str();
  m->add_option("-o,--out", mo->out_dir, "output folder")->required()->check(output_folder());
  m->add_option(
      "--gpu", mo->gpu,
      "catalog GPU whose peaks the profile is relative to (default: matched from the device name)");
  m->add_flag("--quiet", mo->quiet, "no per-case progress");
  m->callback([mo, &exit_code] { exit_code = run_measure(*mo) > 0 ? 1 : 0; });

  auto po = std::make_shared<MemprobeOptions>();
  CLI::App* p =
      app.add_subcommand("memprobe", "usable device memory and KV allocate/free patterns");
  p->add_option("--backend", po->backend, backend_names())
      ->check(CLI::IsMember(backend_registry().names()))
      ->capture_default_str();
  p->add_option("-o,--out", po->out_dir, "output folder")->required()->check(output_folder());
  p->add_option("--model", po->model, "catalog model whose K/V tensors are allocated")
      ->capture_default_str();
  p->add_option("--tokens", po->tokens, "KV tokens per pattern, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  p->callback([po] { run_memprobe(*po); });

  auto co = std::make_shared<CalibrateOptions>();
  CLI::App* c =
      app.add_subcommand("calibrate", "fit the latency profile on a measure folder's train split");
  c->add_option("dir", co->dir, "measure output folder")->required()->check(CLI::ExistingDirectory);
  c->add_option("-o,--out", co->profile, "profile YAML to write")->required()->check(output_file());
  c->add_flag("--quiet", co->quiet, "no table");
  c->callback([co] { run_calibrate(*co); });

  auto dq = std::make_shared<DeviceQueryOptions>();
  CLI::App* d = app.add_subcommand(
      "device", "is a CUDA device usable here (exit 0) or not (exit 1), and cuBLAS");
  d->add_flag("--json", dq->json, "print the JSON record");
  d->add_option("-o,--out", dq->out, "also write the JSON record to FILE")->check(output_file());
  d->callback([dq, &exit_code] { exit_code = run_device_query(*dq); });

  auto io = std::make_shared<ImportOptions>();
  CLI::App* im =
      app.add_subcommand("import", "convert another profiler's measurements into a measure folder");
  im->require_subcommand(1);
  CLI::App* iv =
      im->add_subcommand("vidur", "Vidur's profiling mlp.csv (docs/validate.md, Importing)");
  iv->add_option("input", io->input, "mlp.csv, or the folder holding it")
      ->required()
      ->check(CLI::ExistingPath);
  iv->add_option("-o,--out", io->out_dir, "output folder")->required()->check(output_folder());
  iv->add_option("--gpu", io->gpu, "catalog GPU the data was measured on (default: from the path)");
  iv->add_option("--tp", io->tp, "tensor-parallel rows to import")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  iv->add_flag("--quiet", io->quiet, "no summary");
  iv->callback([io] { run_import_vidur(*io); });
  auto lo = std::make_shared<LlmservingsimImportOptions>();
  CLI::App* il =
      im->add_subcommand("llmservingsim",
                         "LLMServingSim's perf/<GPU>/<org>/<model>/<dtype>/ bundle: measurements, "
                         "fitted profile, held-out error (docs/fidelity.md)");
  il->add_option("input", lo->input,
                 "the bundle folder (holding meta.yaml and tpN/), or one tpN/ folder")
      ->required()
      ->check(CLI::ExistingDirectory);
  il->add_option("-o,--out", lo->out_dir, "output folder")->required()->check(output_folder());
  il->add_option("--tp", lo->tp, "tensor-parallel folder tpN to import")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  il->add_option("--gpu", lo->gpu,
                 "catalog GPU (default: meta.yaml's gpu matched to a catalog display name)");
  il->add_option("--model", lo->model,
                 "catalog model or config.json (default: meta.yaml's model in the catalog)");
  il->add_flag("--quiet", lo->quiet, "no summary");
  il->callback([lo] { run_import_llmservingsim(*lo); });

  auto vo = std::make_shared<VllmRunOptions>();
  CLI::App* vr = app.add_subcommand("vllm-run",
                                    "replay a measured vLLM run through kvsim and compare TTFT, "
                                    "TPOT, E2E and throughput (docs/fidelity.md)");
  vr->add_option("run", vo->run,
                 "run folder (meta.json, requests.jsonl) or a vllm bench serve --save-result "
                 "--save-detailed JSON")
      ->required()
      ->check(CLI::ExistingPath);
  vr->add_option("--gpu", vo->gpu, "catalog GPU the run was served on")->required();
  vr->add_option("--model", vo->model,
                 "catalog model or config.json (default: the run's model name in the catalog)");
  vr->add_option("--profile", vo->profile, "latency profile (default: the GPU's built-in one)")
      ->check(CLI::ExistingFile);
  vr->add_option("--p2p", vo->p2p,
                 "GPU peer-to-peer on the run's host: auto (the catalog GPU's), on or off; decides "
                 "vLLM's all-reduce path")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  vr->add_option("-o,--out", vo->out_dir, "output folder")->required()->check(output_folder());
  vr->add_flag("--quiet", vo->quiet, "no table");
  vr->add_flag_function(
      "--no-plot", [vo](int64_t) { vo->plot = false; }, "do not render e2e.png");
  vr->add_flag(
      "--fit-step-overhead", vo->fit_step_overhead,
      "fit the per-step host overhead to the run's mean TPOT (writes profile-fitted.yaml)");
  vr->callback([vo] { run_vllm_run(*vo); });

  struct ProfileOptions {
    std::string gpu, kernel;
    std::string out;
  };
  auto pf = std::make_shared<ProfileOptions>();
  CLI::App* pr = app.add_subcommand(
      "profile", "write kvsim's built-in profile of a catalog GPU (the YAML compare reads)");
  pr->add_option("--gpu", pf->gpu, "catalog GPU")->required();
  pr->add_option("--attention-kernel", pf->kernel,
                 "flash generation: fa2 or fa3 (default: vLLM's choice for the GPU)")
      ->check(CLI::IsMember({"fa2", "fa3"}));
  pr->add_option("-o,--out", pf->out, "profile YAML to write")->required()->check(output_file());
  pr->callback([pf] {
    const kvsim::GpuSpec g = kvsim::Catalog::builtin().gpu(pf->gpu);
    std::optional<kvsim::FlashKernel> k;
    if (!pf->kernel.empty())
      k = pf->kernel == "fa3" ? kvsim::FlashKernel::kFa3 : kvsim::FlashKernel::kFa2;
    kvsim::write_file_atomic(pf->out, kvsim::write_profile_yaml(kvsim::default_profile(g, k)));
  });

  auto xo = std::make_shared<CompareOptions>();
  CLI::App* x =
      app.add_subcommand("compare", "predict the held-out measurements; MAPE per kernel class");
  x->add_option("dir", xo->dir, "measure output folder")->required()->check(CLI::ExistingDirectory);
  x->add_option("--profile", xo->profile, "profile YAML (from calibrate)")
      ->required()
      ->check(CLI::ExistingFile);
  x->add_option("-o,--out", xo->out_dir, "output folder (default: dir)")->check(output_folder());
  x->add_flag("--quiet", xo->quiet, "no table");
  x->callback([xo] { run_compare(*xo); });

  auto ro = std::make_shared<ReplayOptions>();
  CLI::App* r = app.add_subcommand(
      "replay",
      "run a scenario through kvsim's engine, each iteration timed by a real forward pass");
  r->add_option("scenario", ro->scenario, "scenario YAML")->required()->check(CLI::ExistingFile);
  r->add_option("--backend", ro->backend, "forward pass: cpu (Eigen) or cuda (cuBLAS + kernels/)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  r->add_option("-o,--out", ro->out_dir, "output folder")->required()->check(output_folder());
  r->add_option("--profile", ro->profile,
                "latency profile for every policy's modeled column (default: the scenario's)")
      ->check(CLI::ExistingFile);
  r->add_option("--repeats", ro->repeats, "timed executions per iteration; the median is used")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  r->add_option("--threads", ro->threads, "CPU threads for the GEMMs (cpu backend)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  r->add_option("--seed", ro->seed, "seed of the weights, inputs and filled KV")
      ->capture_default_str();
  r->add_flag("--quiet", ro->quiet, "no summary line");
  r->callback([ro] { run_replay(*ro); });
  // e2e: calibrate, modeled run, measured replay, compare (validate/replay/e2e.h).
  auto eo = std::make_shared<E2eOptions>();
  CLI::App* e = app.add_subcommand(
      "e2e",
      "kvsim's end-to-end error here: calibrate, run the model and the measured replay, compare");
  e->add_option("scenario", eo->scenario, "scenario YAML (e.g. scenarios/replay-cpu-tiny.yaml)")
      ->required()
      ->check(CLI::ExistingFile);
  e->add_option("--backend", eo->backend, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  e->add_option("-o,--out", eo->out_dir, "output folder")->required()->check(output_folder());
  e->add_option("--repeats", eo->repeats, "timed executions per replayed iteration (median)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  e->add_option("--threads", eo->threads, "CPU threads of the forward pass")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  e->add_option("--seed", eo->seed, "weights, inputs and KV values of the forward pass")
      ->capture_default_str();
  e->add_flag("--quiet", eo->quiet, "no progress lines or table");
  e->add_flag_function(
      "--no-plot", [eo](int64_t) { eo->plot = false; }, "do not render e2e.png");
  e->callback([eo] { run_e2e(*eo); });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvsim-validate: measure kernels, calibrate the latency model, report its error"};
  app.set_version_flag("--version", std::string("kvsim-validate ") + kvsim::kvsim_version());
  app.require_subcommand(1);
  int exit_code = 0;
  add_commands(app, exit_code);
  kvsim::install_stop_signals("kvsim-validate", remove_scratch_folders);
  // exit_code: a measure whose correctness check failed still ran to the end, and says so.
  const int code = kvsim::parse_and_report(app, argc, argv, "kvsim-validate", 0);
  return code != 0 ? code : exit_code;
}
