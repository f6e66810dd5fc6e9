// `kvsim sweep SCENARIO.yaml -o DIR`: expands the scenario's `sweep:` block, runs every point
// (on --jobs threads, optionally one --shard of them) into DIR/points/<index>-<slug>/, and writes
// DIR/summary.csv. Re-running into the same DIR resumes: finished points are not run again.
// Built with MPI and started by mpirun, rank r of K runs shard r/K and rank 0 writes the
// summary once every rank is done (DIR must be a folder every rank sees).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>

#ifdef KVSIM_HAVE_MPI
#include <mpi.h>
#endif

#include <fmt/format.h>

#include "apps/kvsim/commands.h"
#include "core/atomic_file.h"
#include "core/config_patch.h"
#include "core/data_path.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "sim/run/arguments.h"
#include "sim/sweep/sweep_runner.h"

namespace kvsim::cli {

namespace {

struct SweepArgs {
  std::string scenario;
  std::string out_dir;
  std::vector<std::string> sets;
  std::string shard = "0/1";
  int jobs = 0;
  bool no_progress = false;
  bool plot = false;
  SweepOptions options;
};

#ifdef KVSIM_HAVE_MPI
// True when a launcher (mpirun, srun) started this process as one rank of several.
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

// MPI for the duration of one sweep; finalized on every path out, errors included.
struct MpiSession {
  int rank = 0, size = 1;
  MpiSession() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  ~MpiSession() { MPI_Finalize(); }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  // True if any rank failed; every rank must call it (it is the rendezvous).
  bool any_failed(bool mine) const {
    int in = mine ? 1 : 0, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return out != 0;
  }
};

// Rank r runs shard r/K on --jobs threads (default 1: ranks are the parallelism); rank 0 then
// builds summary.csv from the shared folder, which equals the single-process file.
void sweep_mpi(SweepArgs& a, const SweepPlan& plan) {
  MpiSession mpi;
  if (a.shard != "0/1") throw InputError("--shard and mpirun both split the points; use one");
  a.options.shard_index = mpi.rank;
  a.options.shard_count = mpi.size;
  a.options.out_dir = a.out_dir;
  a.options.jobs = a.jobs > 0 ? a.jobs : 1;
  a.options.progress = false;
  std::exception_ptr error;
  SweepReport r;
  try {
    r = run_sweep(plan, Catalog::builtin(), a.options);
  } catch (...) {
    error = std::current_exception();
  }
  const bool failed = mpi.any_failed(error != nullptr);
  if (error) std::rethrow_exception(error);
  if (failed)
    throw InputError(
        fmt::format("rank {}: another rank's points failed (see its message)", mpi.rank));
  if (mpi.rank != 0) return;
  if (mpi.size > 1) write_sweep_summary_csv({a.options.out_dir}, a.options.out_dir / "summary.csv");
  fmt::print("sweep {}: {} points on {} MPI ranks, rank 0 ran {}, {} already complete\n",
             a.scenario, r.points_total, mpi.size, r.points_run, r.points_skipped);
  fmt::print("results: {}/summary.csv, {}/points/\n", a.out_dir, a.out_dir);
}
#endif

// The parsed file lives only while the plan is made: the plan keeps the base scenario and the
// axis values, not the document with its (possibly long) `sweep:` lists.
SweepPlan make_plan(const SweepArgs& a) {
  ConfigNode raw = ConfigNode::parse_file(a.scenario);
  YAML::Node patched = raw.yaml();
  for (const auto& s : a.sets) apply_set_in_place(patched, s);
  return expand_sweep(a.sets.empty() ? raw
                                     : ConfigNode::wrap_with_sets(patched, a.scenario, a.sets));
}

void sweep(SweepArgs& a) {
  check_output_folder(a.out_dir);
  const SweepPlan plan = make_plan(a);
#ifdef KVSIM_HAVE_MPI
  if (launched_by_mpi()) return sweep_mpi(a, plan);
#endif
  parse_shard(a.shard, a.options.shard_index, a.options.shard_count);
  a.options.out_dir = a.out_dir;
  a.options.jobs =
      a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  a.options.progress = !a.no_progress && isatty(STDERR_FILENO);
  const SweepReport r = run_sweep(plan, Catalog::builtin(), a.options);
  fmt::print("sweep {}: {} points{}, {} run, {} already complete\n", a.scenario, r.points_total,
             a.options.shard_count > 1 ? fmt::format(" ({} in shard {})", r.points_mine, a.shard)
                                       : std::string(),
             r.points_run, r.points_skipped);
  if (r.summary_written) {
    fmt::print("results: {}/summary.csv, {}/points/\n", a.out_dir, a.out_dir);
    if (a.plot) {
      std::fflush(stdout);
      run_data_script(kPlotScript, {a.out_dir});
      run_data_script("kvsim_report.py", {a.out_dir, "--kvsim-version", kvsim_version()});
      fmt::print("figures: {0}/plots/  report: {0}/report.html\n", a.out_dir);
    }
  } else {
    fmt::print("results: {}/points/; when every shard is done: kvsim merge <folders> -o {}\n",
               a.out_dir, a.out_dir);
  }
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
#ifdef KVSIM_HAVE_MPI
  auto* cmd = app.add_subcommand("sweep",
                                 "run every point of a scenario's `sweep:` block (MPI: under "
                                 "mpirun -n K the ranks split the points)");
#else
  auto* cmd = app.add_subcommand("sweep", "run every point of a scenario's `sweep:` block");
#endif
  cmd->add_option("scenario", a->scenario, "scenario YAML file")->required();
  cmd->add_option("-o,--out", a->out_dir, "result folder (re-running into it resumes)")->required();
  cmd->add_option("-j,--jobs", a->jobs, "points run at once on threads (default: the cores)")
      ->check(CLI::Range(args::kJobs.min, args::kJobs.max));
  cmd->add_option("--set", a->sets,
                  "override a scenario key before expanding: path=value (repeatable)");
  cmd->add_option("--shard", a->shard,
                  "run only points with index % n == i (i/n); join with `kvsim merge`")
      ->capture_default_str();
  cmd->add_flag("--no-progress", a->no_progress, "no progress line on stderr");
  cmd->add_flag("--plot", a->plot,
                "also render the figures (DIR/plots) and the report (DIR/report.html)");
  cmd->add_flag("--check-invariants", a->options.run.check_invariants,
                "check memory and bookkeeping invariants after every iteration (slower)");
  cmd->add_option("--max-events", a->options.run.max_events,
                  "stop a runaway point after this many events")
      ->capture_default_str();
  cmd->add_option("--max-sim-time", a->options.run.max_sim_time_s,
                  "stop a runaway point at this simulated time (s)")
      ->capture_default_str();
  cmd->add_option("--sample-interval", a->options.run.sample_interval_s, "timeseries period (s)")
      ->check(CLI::Range(args::kSampleInterval.min, args::kSampleInterval.max))
      ->capture_default_str();
  cmd->callback([a] { sweep(*a); });
}

}  // namespace kvsim::cli
