#include "validate/grid.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/config_node.h"
#include "core/errors.h"

namespace kvsim::validate {

namespace {

// A key holding one value or a list of them; `fallback` when absent.
template <class T>
std::vector<T> list_of(const ConfigNode& entry, const std::string& key, std::vector<T> fallback,
                       Bounds bounds = {}) {
  auto c = entry.optional_child(key);
  if (!c || c->is_null()) {
    if (fallback.empty()) entry.child(key);  // throws "missing key" at the entry's position
    return fallback;
  }
  std::vector<T> out;
  if (c->is_sequence()) {
    if (c->size() == 0) c->fail_expected("a non-empty list");
    for (size_t i = 0; i < c->size(); ++i) out.push_back(c->at(i).template as<T>(bounds));
  } else {
    out.push_back(c->template as<T>(bounds));
  }
  return out;
}

std::vector<std::string> string_list(const ConfigNode& entry, const std::string& key,
                                     std::vector<std::string> fallback,
                                     std::initializer_list<std::string_view> choices) {
  auto c = entry.optional_child(key);
  if (!c || c->is_null()) return fallback;
  std::vector<ConfigNode> nodes;
  if (c->is_sequence()) {
    for (size_t i = 0; i < c->size(); ++i) nodes.push_back(c->at(i));
  } else {
    nodes.push_back(*c);
  }
  std::vector<std::string> out;
  for (const ConfigNode& n : nodes) {
    const auto v = n.as<std::string>();
    if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
      std::string all;
      for (auto ch : choices) all += (all.empty() ? "" : ", ") + std::string(ch);
      n.fail_expected("one of " + all);
    }
    out.push_back(v);
  }
  return out;
}

const Bounds kPositive{.min = 1};

struct Entry {
  KernelClass kind;
  std::vector<int> versions;
  std::vector<kernels::Precision> dtypes;
};

Entry common_axes(const ConfigNode& e, const std::string& backend) {
  Entry out;
  out.kind = parse_class(
      e.get_enum("class", {"native", "flash", "paged_decode", "membw_copy", "membw_read", "gemm"}));
  const auto versions = list_of<int>(e, "versions", {1}, {.min = 1, .max = 99});
  // The CPU backend has one implementation per class: its reference-derived kernel, "v0".
  out.versions = backend == "cpu" ? std::vector<int>{0} : versions;
  for (const std::string& d : string_list(e, "dtypes", {"fp16"}, {"fp16", "bf16", "fp32"})) {
    out.dtypes.push_back(kernels::parse_precision(d));
  }
  if (out.kind == KernelClass::kMembwCopy || out.kind == KernelClass::kMembwRead) {
    out.dtypes = {kernels::Precision::kFp16};  // bytes are bytes
  }
  return out;
}

// Calls fn(a, b, ...) once for every combination of one value from each list, the first list
// outermost and the last innermost: the order the grid's cases are numbered in.
template <class Fn>
void for_each_combination(Fn&& fn) {
  fn();
}
template <class Fn, class List, class... Rest>
void for_each_combination(Fn&& fn, const List& first, const Rest&... rest) {
  for (const auto& v : first) {
    for_each_combination([&](const auto&... tail) { fn(v, tail...); }, rest...);
  }
}

// One case of c's class per combination of its versions, its dtypes and `axes` (in that
// nesting order); shape(case, axis values...) fills in the class's shape.
template <class Shape, class... Axes>
void expand_cases(const Entry& c, std::vector<KernelCase>& out, Shape shape, const Axes&... axes) {
  for_each_combination(
      [&](int v, kernels::Precision p, const auto&... x) {
        KernelCase k;
        k.kind = c.kind;
        k.version = v;
        k.precision = p;
        shape(k, x...);
        out.push_back(k);
      },
      c.versions, c.dtypes, axes...);
}

void expand_attention(const ConfigNode& e, const Entry& c, std::vector<KernelCase>& out) {
  const auto batch = list_of<int64_t>(e, "batch", {1}, kPositive);
  const auto heads = list_of<int64_t>(e, "heads", {}, kPositive);
  const auto kv_heads = list_of<int64_t>(e, "kv_heads", heads, kPositive);
  const auto seq = list_of<int64_t>(e, "seq", {}, {.min = 1, .max = 1 << 20});
  const auto context = list_of<int64_t>(e, "context", {0}, {.min = 0, .max = 1 << 20});
  const auto head_dim = list_of<int64_t>(e, "head_dim", {128}, kPositive);
  const auto causal = list_of<bool>(e, "causal", {true});
  expand_cases(
      c, out,
      [](KernelCase& k, int64_t b, int64_t h, int64_t kvh, int64_t s, int64_t ctx, int64_t d,
         bool cz) {
        k.attn = {.batch = b,
                  .heads = h,
                  .kv_heads = kvh,
                  .seq_q = s,
                  .seq_kv = s + ctx,
                  .head_dim = d,
                  .causal = cz};
      },
      batch, heads, kv_heads, seq, context, head_dim, causal);
}

void expand_paged(const ConfigNode& e, const Entry& c, std::vector<KernelCase>& out) {
  const auto batch = list_of<int64_t>(e, "batch", {1}, kPositive);
  const auto heads = list_of<int64_t>(e, "heads", {}, kPositive);
  const auto kv_heads = list_of<int64_t>(e, "kv_heads", heads, kPositive);
  const auto head_dim = list_of<int64_t>(e, "head_dim", {128}, kPositive);
  const auto context = list_of<int64_t>(e, "context", {}, {.min = 1, .max = 1 << 24});
  const auto block = list_of<int64_t>(e, "block_size", {16}, {.min = 1, .max = 256});
  expand_cases(
      c, out,
      [](KernelCase& k, int64_t b, int64_t h, int64_t kvh, int64_t d, int64_t ctx, int64_t bs) {
        k.paged = {.batch = b,
                   .heads = h,
                   .kv_heads = kvh,
                   .head_dim = d,
                   .context = ctx,
                   .block_size = bs};
      },
      batch, heads, kv_heads, head_dim, context, block);
}

void expand_gemm(const ConfigNode& e, const Entry& c, std::vector<KernelCase>& out) {
  const auto m = list_of<int64_t>(e, "m", {}, kPositive);
  const auto n = list_of<int64_t>(e, "n", {}, kPositive);
  const auto k = list_of<int64_t>(e, "k", {}, kPositive);
  expand_cases(
      c, out,
      [](KernelCase& g, int64_t mm, int64_t nn, int64_t kk) {
        g.gemm = {.m = mm, .n = nn, .k = kk};
      },
      m, n, k);
}

void expand_membw(const ConfigNode& e, const Entry& c, std::vector<KernelCase>& out) {
  const auto mib = list_of<double>(e, "bytes_mib", {}, {.min = 0.001, .max = 1 << 20});
  // c.dtypes is {fp16} here (common_axes): a copy moves bytes, whatever their type.
  expand_cases(
      c, out,
      [](KernelCase& k, double m) {
        // Rounded down to whole KiB: the model maps a copy onto rows of 512 two-byte elements.
        k.bytes = static_cast<int64_t>(m * 1024.0) * 1024;
      },
      mib);
}

void assign_splits(Grid& g) {
  std::map<KernelClass, int> top;  // highest version per class
  for (const KernelCase& c : g.cases) top[c.kind] = std::max(top[c.kind], c.version);
  std::map<KernelClass, int> seen;
  for (KernelCase& c : g.cases) {
    if (!modelled_kind(c) || c.version != top[c.kind]) {
      c.split = "none";
      continue;
    }
    const int i = seen[c.kind]++;
    c.split = i % g.holdout_every == g.holdout_every - 1 ? "test" : "train";
  }
}

}  // namespace

bool modelled_kind(const KernelCase& c) {
  switch (c.kind) {
    case KernelClass::kFlash: return c.attn.causal;  // the model's prefill is causal
    case KernelClass::kMembwRead: return false;      // no read-only operation in the model
    default: return true;
  }
}

namespace {

Grid grid_from(const ConfigNode& root, const std::string& backend) {
  if (!root.is_map()) root.fail_expected("a grid (a map with name and kernels)");
  Grid g;
  g.source = root.source();
  g.name = root.get<std::string>("name");
  g.seed = static_cast<uint64_t>(root.get<int64_t>("seed", 1, {.min = 0}));
  if (auto t = root.optional_child("timing")) {
    if (!t->is_map()) t->fail_expected("a map");
    g.timing.warmup = t->get<int>("warmup", g.timing.warmup, {.min = 0, .max = 1000});
    g.timing.repetitions =
        t->get<int>("repetitions", g.timing.repetitions, {.min = 1, .max = 10000});
    g.timing.flush_l2 = t->get<bool>("flush_l2", g.timing.flush_l2);
  }
  if (auto c = root.optional_child("check")) {
    if (!c->is_map()) c->fail_expected("a map");
    g.check_max_flops = c->get<double>("max_flops", g.check_max_flops, {.min = 0});
    g.check_max_bytes = c->get<int64_t>("max_bytes", g.check_max_bytes, {.min = 0});
  }
  g.holdout_every = root.get<int>("holdout_every", g.holdout_every, {.min = 2, .max = 1000});
  const ConfigNode kernels = root.child("kernels");
  if (!kernels.is_sequence() || kernels.size() == 0) kernels.fail_expected("a non-empty list");
  for (size_t i = 0; i < kernels.size(); ++i) {
    const ConfigNode e = kernels.at(i);
    if (!e.is_map()) e.fail_expected("a map with a class key");
    const Entry c = common_axes(e, backend);
    const size_t first = g.cases.size();
    switch (c.kind) {
      case KernelClass::kNative:
      case KernelClass::kFlash: expand_attention(e, c, g.cases); break;
      case KernelClass::kPagedDecode: expand_paged(e, c, g.cases); break;
      case KernelClass::kGemm: expand_gemm(e, c, g.cases); break;
      case KernelClass::kMembwCopy:
      case KernelClass::kMembwRead: expand_membw(e, c, g.cases); break;
    }
    for (size_t j = first; j < g.cases.size(); ++j) {
      try {
        g.cases[j].validate();
      } catch (const InputError& err) {
        throw ConfigError(fmt::format("{}: {}: {}", e.where(), e.path(), err.what()));
      }
    }
  }
  root.reject_unknown_keys();
  for (KernelCase& c : g.cases) {
    c.check = c.kind == KernelClass::kMembwCopy || c.kind == KernelClass::kMembwRead
                  ? c.bytes <= g.check_max_bytes
                  : c.flops() <= g.check_max_flops &&
                        c.bytes_moved() <= static_cast<double>(g.check_max_bytes);
  }
  assign_splits(g);
  return g;
}

}  // namespace

Grid parse_grid(const std::string& yaml_text, const std::string& source,
                const std::string& backend) {
  return grid_from(ConfigNode::parse_string(yaml_text, source), backend);
}

Grid load_grid(const std::filesystem::path& path, const std::string& backend) {
  return grid_from(ConfigNode::parse_file(path), backend);
}

}  // namespace kvsim::validate
