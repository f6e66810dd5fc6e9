// `kvsim list [CONCEPT]`: every pluggable concept's registered names, one-line descriptions and
// configuration keys, printed from the registries themselves (core/registry.h), so the listing
// can never disagree with what the scenario loader accepts.
#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include <functional>
#include <string>
#include <vector>

#include "apps/kvsim/commands.h"
#include "core/text_table.h"
#include "models/memory/kv_store_registry.h"
#include "sim/cluster/router.h"
#include "sim/guards/guard_registry.h"
#include "workloads/generators/open_loop.h"
#include "workloads/lengths.h"
#include "workloads/traces/trace_formats.h"
#include "workloads/workload.h"

namespace kvsim::cli {

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "-" : out;
}

// One concept's table: name, description, keys, and `extra` (a column only some concepts have).
template <class F>
std::string listing(const Registry<F>& r, const std::string& where, const std::string& keys_title,
                    const std::string& extra_title = "",
                    std::function<std::string(const F&)> extra = nullptr) {
  std::vector<std::string> headers{"name", "description", keys_title};
  if (extra) headers.push_back(extra_title);
  TextTable t(headers);
  for (const auto& e : r.entries()) {
    std::vector<std::string> row{e.name, e.description, join(e.keys)};
    if (extra) row.push_back(extra(e.make));
    t.add_row(std::move(row));
  }
  const std::string& name = r.concept_name();
  return fmt::format("{}{} ({})\n{}", name, name.back() == 's' ? "es" : "s", where, t.render());
}

struct Concept {
  std::string id;  // the CONCEPT argument
  std::function<std::string()> print;
};

const std::vector<Concept>& concepts() {
  static const std::vector<Concept> list = {
      {"guards",
       [] {
         return listing<GuardFactory>(
             guard_registry(), "policies[].guards[].type; also 'none'", "keys", "needs KV store",
             [](const GuardFactory& f) { return kv_capability_list(f.needs); });
       }},
      {"kv",
       [] {
         return listing<KvStoreFactory>(
             kv_store_registry(), "engine.kv.type", "keys", "provides",
             [](const KvStoreFactory& f) { return kv_capability_list(f.provides); });
       }},
      {"workloads",
       [] {
         return listing(workload_kind_registry(), "the one key given under workload:", "keys");
       }},
      {"arrivals",
       [] { return listing(arrival_process_registry(), "workload.arrivals.type", "keys"); }},
      {"lengths",
       [] {
         return listing(length_dist_registry(),
                        "workload.prompt_tokens / output_tokens / bursts[] .type", "keys");
       }},
      {"traces",
       [] {
         return listing(trace_format_registry(), "workload.trace.format; or auto", "columns");
       }},
      {"routers", [] { return listing(router_registry(), "cluster.router.type", "keys"); }},
  };
  return list;
}

}  // namespace

void add_list_command(CLI::App& app) {
  auto which = std::make_shared<std::string>();
  std::vector<std::string> ids;
  std::string names;
  for (const auto& c : concepts()) {
    ids.push_back(c.id);
    names += (names.empty() ? "" : ", ") + c.id;
  }
  auto* cmd = app.add_subcommand(
      "list", "list the registered types of each pluggable concept (" + names + ")");
  cmd->add_option("concept", *which, "one concept (default: all)")->check(CLI::IsMember(ids));
  cmd->callback([which] {
    bool first = true;
    for (const auto& c : concepts()) {
      if (!which->empty() && c.id != *which) continue;
      fmt::print("{}{}", first ? "" : "\n", c.print());
      first = false;
    }
  });
}

}  // namespace kvsim::cli
