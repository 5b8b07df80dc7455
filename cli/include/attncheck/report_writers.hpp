// The files `attncheck check` and `attncheck mutants` write for machines: the verdict and its figures
// as JSON (--json), and JUnit XML for CI (--junit).
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attncheck/campaign.hpp"

namespace attncheck {

using Json = nlohmann::ordered_json;

// A number as JSON, NaN and inf as strings (JSON's numbers hold neither): an error/bound of a wrong
// special value is "inf". For either JSON type: the reports' (ordered) and the workers' answers.
template <class J = Json>
J number_json(double x) {
  return std::isfinite(x) ? J(x) : J(std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
}

// A check's result as the --json file says it: the verdict, why it is inconclusive (empty: it is
// not), the summary's figures, per-property counts and seconds, what was checked and under which
// policies, the policy hint (or empty), and each finding with its replay file (replay_files[n] for
// findings[n]; empty when it has none).
Json result_json(const std::string& verdict, const CampaignOptions& options, const CampaignResult& r,
                 const std::vector<std::string>& replay_files, const std::string& hint, const std::string& inconclusive);

// Writes `json` to `path`, indented. Throws std::runtime_error with a one-line reason when the file
// cannot be written.
void write_json(const std::string& path, const Json& json);

// JUnit XML for CI: one test case per property that ran (its seconds summed over its runs), the
// finding as its property's failure with the report as printed (reports[n] for r.findings[n]), and a
// floating-point-mode finding as a failing test case of its own; `summary` as the suite's output.
// Throws std::runtime_error with a one-line reason when the file cannot be written.
void write_junit(const std::string& path, const CampaignResult& r, const std::vector<std::string>& reports,
                 const std::string& summary);

}  // namespace attncheck
