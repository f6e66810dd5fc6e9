// `kvsim-validate memprobe`: what the device really gives a serving process. On a GPU: free and
// total memory right after the CUDA context exists and after cuBLAS is initialised, the largest
// total a process can actually cudaMalloc, and allocate/free patterns of one model's per-layer K
// and V tensors with the driver's view (cudaMemGetInfo) of each step, for comparison with the
// simulator's allocator models. On the CPU backend there is no device: it says so and writes the
// host's memory and the pattern's requested sizes.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "validate/backend.h"
#include "validate/commands.h"
#ifdef KVSIM_HAVE_CUDA
#include "kernels/cuda_api.h"
#endif

namespace kvsim::validate {

namespace {

struct Pattern {
  int64_t tokens;
  int64_t tensor_bytes;  // one layer's K (or V)
  int64_t tensors;       // 2 x layers
};

std::vector<Pattern> patterns(const ModelSpec& m, const std::vector<int64_t>& tokens) {
  std::vector<Pattern> out;
  for (int64_t t : tokens) {
    out.push_back(
        {t, t * m.kv_heads * m.head_dim * dtype_bytes(m.kv_dtype), 2 * int64_t{m.layers}});
  }
  return out;
}

int64_t meminfo_field(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream s(line.substr(key.size() + 1));
      int64_t kib = 0;
      s >> kib;
      return kib * 1024;
    }
  }
  return -1;
}

#ifdef KVSIM_HAVE_CUDA
namespace cu = kernels::cuda;

nlohmann::ordered_json mem_json(const cu::MemInfo& m) {
  return {{"free_bytes", m.free_bytes},
          {"total_bytes", m.total_bytes},
          {"used_bytes", m.total_bytes - m.free_bytes}};
}

// Allocates in shrinking chunks until nothing more fits; frees everything; returns the total.
int64_t allocatable_bytes() {
  std::vector<void*> held;
  int64_t total = 0;
  for (int64_t chunk : {int64_t{1} << 30, int64_t{64} << 20, int64_t{2} << 20}) {
    while (void* p = cu::try_alloc(chunk)) {
      held.push_back(p);
      total += chunk;
    }
  }
  for (void* p : held) cu::free_device(p);
  return total;
}

std::string cuda_probe(const ModelSpec& model, const std::vector<Pattern>& pats,
                       nlohmann::ordered_json& j) {
  const cu::DeviceInfo info = cu::probe_device();  // creates the context
  if (!info.available)
    throw InputError("memprobe --backend cuda: no usable CUDA device (" + info.why_not + ")");
  j["device"] = {{"name", info.name}, {"total_bytes", info.total_bytes}};
  const cu::MemInfo ctx = cu::mem_get_info();
  j["after_context"] = mem_json(ctx);
  j["after_context"]["note"] = "used = the CUDA context plus anything other processes hold";
  cu::init_libraries();
  const cu::MemInfo libs = cu::mem_get_info();
  j["after_cublas_init"] = mem_json(libs);
  j["cublas_init_bytes"] = ctx.free_bytes - libs.free_bytes;
  const int64_t usable = allocatable_bytes();
  j["allocatable_bytes"] = usable;
  j["allocatable_gib"] = static_cast<double>(usable) / (1 << 30);
  std::string csv =
      "tokens,step,action,tensor_bytes,count,requested_bytes,free_before,free_after,device_delta,"
      "overhead_bytes\n";
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const Pattern& p : pats) {
    std::vector<void*> held(static_cast<size_t>(p.tensors), nullptr);
    int step = 0;
    auto record = [&](const std::string& action, int64_t bytes, int64_t count, int64_t before,
                      int64_t after) {
      const int64_t delta = before - after;  // > 0 when memory was taken
      csv += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", p.tokens, step++, action, bytes, count,
                         bytes * count, before, after, delta, std::abs(delta) - bytes * count);
      rows.push_back({{"tokens", p.tokens},
                      {"action", action},
                      {"tensor_bytes", bytes},
                      {"count", count},
                      {"device_delta", delta}});
    };
    // 1: every layer's K and V; 2: free every other layer (the holes a finished request leaves);
    // 3: refill the holes with tensors 1.25x larger (they do not fit the holes); 4: free all.
    int64_t before = cu::mem_get_info().free_bytes;
    bool oom = false;
    for (auto& h : held) oom = oom || !(h = cu::try_alloc(p.tensor_bytes));
    record(oom ? "allocate_all_oom" : "allocate_all", p.tensor_bytes, p.tensors, before,
           cu::mem_get_info().free_bytes);
    before = cu::mem_get_info().free_bytes;
    int64_t freed = 0;
    for (size_t i = 0; i < held.size(); i += 4) {  // one layer's K and V out of every two layers
      for (size_t k = i; k < std::min(i + 2, held.size()); ++k) {
        if (held[k]) cu::free_device(held[k]);
        held[k] = nullptr;
        ++freed;
      }
    }
    record("free_alternate_layers", p.tensor_bytes, freed, before, cu::mem_get_info().free_bytes);
    before = cu::mem_get_info().free_bytes;
    const int64_t bigger = (p.tensor_bytes * 5 / 4 + 511) / 512 * 512;
    int64_t placed = 0;
    for (auto& h : held) {
      if (!h && (h = cu::try_alloc(bigger))) ++placed;
    }
    record("refill_1.25x", bigger, placed, before, cu::mem_get_info().free_bytes);
    before = cu::mem_get_info().free_bytes;
    for (auto& h : held) {
      if (h) cu::free_device(h);
      h = nullptr;
    }
    record("free_all", 0, 0, before, cu::mem_get_info().free_bytes);
  }
  j["kv_steps"] = rows;
  (void)model;
  return csv;
}
#endif

}  // namespace

void run_memprobe(const MemprobeOptions& o) {
  const ModelSpec model = Catalog::builtin().model(o.model);
  const std::vector<Pattern> pats = patterns(model, o.tokens);
  nlohmann::ordered_json j;
  j["tool"] = "kvsim-validate memprobe";
  j["backend"] = o.backend;
  j["model"] = model.name;
  nlohmann::ordered_json pj = nlohmann::ordered_json::array();
  for (const Pattern& p : pats) {
    pj.push_back({{"tokens", p.tokens},
                  {"tensors", p.tensors},
                  {"tensor_bytes", p.tensor_bytes},
                  {"requested_bytes", p.tensor_bytes * p.tensors}});
  }
  j["kv_patterns"] = pj;
  if (o.backend == "cpu") {
    j["note"] =
        "CPU run: there is no device memory to probe; the host's memory and the KV "
        "pattern's requested sizes are recorded, nothing was allocated on a GPU";
    j["host"] = {{"mem_total_bytes", meminfo_field("MemTotal")},
                 {"mem_available_bytes", meminfo_field("MemAvailable")}};
    write_file_atomic(o.out_dir / "memprobe.json", j.dump(2) + "\n");
    fmt::print(
        "memprobe: CPU run, no device memory to probe. Host MemTotal {} bytes, MemAvailable "
        "{} bytes; KV pattern of {} ({} tensors per pattern) recorded.\nwrote {}\n",
        meminfo_field("MemTotal"), meminfo_field("MemAvailable"), model.name,
        pats.empty() ? 0 : pats[0].tensors, (o.out_dir / "memprobe.json").string());
    return;
  }
  if (o.backend != "cuda") {
    find_backend(o.backend);  // throws for an unknown name
    throw InputError(fmt::format("memprobe: backend \"{}\" has no memory probe", o.backend));
  }
#ifdef KVSIM_HAVE_CUDA
  const std::string csv = cuda_probe(model, pats, j);
  write_file_atomic(o.out_dir / "memprobe.csv", csv);
  write_file_atomic(o.out_dir / "memprobe.json", j.dump(2) + "\n");
  fmt::print(
      "memprobe: {}: after context {} of {} bytes free; cuBLAS init took {} bytes; "
      "allocatable {} bytes ({:.2f} GiB)\nwrote {} and {}\n",
      j["device"]["name"].get<std::string>(), j["after_context"]["free_bytes"].get<int64_t>(),
      j["after_context"]["total_bytes"].get<int64_t>(), j["cublas_init_bytes"].get<int64_t>(),
      j["allocatable_bytes"].get<int64_t>(), j["allocatable_gib"].get<double>(),
      (o.out_dir / "memprobe.json").string(), (o.out_dir / "memprobe.csv").string());
#else
  throw InputError("memprobe --backend cuda: this kvsim-validate was built without CUDA");
#endif
}

}  // namespace kvsim::validate
