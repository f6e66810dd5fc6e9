#include "models/latency/collective_curve.h"

#include <fmt/format.h>

#include "core/config_node.h"
#include "core/data_path.h"

namespace kvsim {

namespace {

CollectiveCurve parse_curve(const ConfigNode& n) {
  if (!n.is_map()) n.fail_expected("a curve {op, mode, world, p2p, points}");
  CollectiveCurve c;
  c.op = n.get_enum<CollectiveOp>("op", {{"allreduce", CollectiveOp::kAllReduce},
                                         {"nccl_allreduce", CollectiveOp::kNcclAllReduce},
                                         {"all_gather", CollectiveOp::kAllGather},
                                         {"reduce_scatter", CollectiveOp::kReduceScatter},
                                         {"send_recv", CollectiveOp::kSendRecv}});
  c.graph = n.get_enum<bool>("mode", {{"graph", true}, {"eager", false}});
  c.world = n.get<int>("world", {.min = 2, .max = 1024});
  c.p2p = n.get<bool>("p2p", true);
  c.source = n.get<std::string>("source");
  n.get<std::string>("what", "");
  const ConfigNode pts = n.child("points");
  if (!pts.is_sequence() || pts.size() < 2) pts.fail_expected("at least two [bytes, us] points");
  for (size_t i = 0; i < pts.size(); ++i) {
    const ConfigNode p = pts.at(i);
    if (!p.is_sequence() || p.size() != 2) p.fail_expected("a [bytes, us] pair");
    const double bytes = p.at(0).as<double>({.min = 1, .max = 1e13});
    const double us = p.at(1).as<double>({.min = 1e-3, .max = 1e9});
    if (!c.points.empty() && !(bytes > c.points.back().first)) {
      p.fail("points must be in ascending order of bytes");
    }
    c.points.emplace_back(bytes, us * 1e-6);
  }
  n.reject_unknown_keys();
  return c;
}

}  // namespace

double CollectiveCurve::seconds(double bytes) const {
  const auto& p = points;
  if (bytes <= p.front().first) return p.front().second;
  size_t i = 1;
  while (i + 1 < p.size() && bytes > p[i].first) ++i;
  const auto [b0, t0] = p[i - 1];
  const auto [b1, t1] = p[i];
  return t0 + (t1 - t0) * (bytes - b0) / (b1 - b0);
}

CollectiveTables CollectiveTables::load(const std::filesystem::path& file) {
  const ConfigNode root = ConfigNode::parse_file(file);
  if (!root.is_map()) root.fail_expected("a map of GPU catalog keys to curve lists");
  CollectiveTables t;
  for (const std::string& gpu : root.keys()) {
    const ConfigNode list = root.child(gpu);
    if (!list.is_sequence()) list.fail_expected("a list of curves");
    std::vector<CollectiveCurve>& curves = t.curves_[gpu];
    for (size_t i = 0; i < list.size(); ++i) curves.push_back(parse_curve(list.at(i)));
  }
  root.reject_unknown_keys();
  return t;
}

const CollectiveTables& CollectiveTables::builtin() {
  static const CollectiveTables tables =
      load(data_dir() / "models" / "catalog" / "collectives.yaml");
  return tables;
}

const CollectiveCurve* CollectiveTables::find(const std::string& gpu, CollectiveOp op, bool graph,
                                              int world, bool p2p) const {
  const auto it = curves_.find(gpu);
  if (it == curves_.end()) return nullptr;
  for (const CollectiveCurve& c : it->second) {
    if (c.op == op && c.graph == graph && c.world == world && c.p2p == p2p) return &c;
  }
  return nullptr;
}

}  // namespace kvsim
