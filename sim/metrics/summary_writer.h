// The run's result files: summary.json, summary.csv and the terminal table, from PolicySummary.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/metrics/recorder.h"

namespace kvsim {

nlohmann::ordered_json summary_json(const std::vector<PolicySummary>& policies);
std::string summary_csv(const std::vector<PolicySummary>& policies);
std::string summary_table(const std::vector<PolicySummary>& policies);

}  // namespace kvsim
