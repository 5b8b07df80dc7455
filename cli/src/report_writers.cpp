// The --json and --junit files of `attncheck check` (report_writers.hpp).
#include "attncheck/report_writers.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "attncheck/domain.hpp"
#include "attncheck/features.hpp"
#include "attncheck/html_report.hpp"
#include "attncheck/policies.hpp"

namespace attncheck {
namespace {

// The features among `bits`, by name (the feature table's order), as the JSON says them.
std::vector<std::string> features_named(uint32_t bits) {
  std::vector<std::string> names;
  for (const Feature& f : features())
    if (bits & f.capability) names.push_back(f.name);
  return names;
}

// The policies as the JSON says them: each flag's word.
Json policies_json(const Policies& policies) {
  Json json = Json::object();
  for (const Policy& p : kPolicies) json[p.flag] = policy_word(p, policies);
  return json;
}

// A finding as the JSON's fields: what broke and where (the failed call's wrong element: its tensor,
// index, computed and exact values and bound; null when no call was wrong), the call's shape and
// features, what it needs and which policies would accept it, then the report and its replay file.
Json finding_json(const Finding& f, const std::string& replay_file) {
  const Diagnosis& d = f.diagnosis;
  const Mismatch& m = d.element;
  Json index = Json::array();
  for (int r = 0; d.wrong && r < m.rank; ++r) index.push_back(m.at[r]);
  return {{"property", f.property},
          {"kind", f.kind},
          {"tensor", d.wrong ? Json(m.tensor) : Json()},
          {"index", d.wrong ? index : Json()},
          {"computed", d.wrong ? number_json(m.computed) : Json()},
          {"exact", d.wrong ? number_json(double(m.exact)) : Json()},
          {"bound", d.wrong ? number_json(m.bound) : Json()},
          {"shape", d ? Json(d.shape) : Json()},
          {"features", d.features},
          {"fails_only_with", d.needs},
          {"accepted_under", d.accepted_under},
          {"cause", d.cause.empty() ? Json() : Json(d.cause)},
          {"format", f.format},
          {"shrunk_to", shrunk_shape(f)},
          {"error_bound_ratio", number_json(f.ratio)},
          {"message", f.message},
          {"replay", replay_file}};
}

// The domain as the JSON says it: its restrictions' words and its limits by name.
Json domain_json(const Domain& d) {
  Json restrictions = Json::array(), limits = Json::object();
  for (const Restriction& r : kRestrictions)
    if (d.only(r.bit)) restrictions.push_back(r.word);
  for (const LimitField& l : kLimitFields)
    if (d.limits.*l.field) limits[l.word] = d.limits.*l.field;
  if (!d.limits.widths.empty()) limits[kHeadDimsWord] = d.limits.widths;
  return {{"restrictions", restrictions}, {"limits", limits}};
}

}  // namespace

Json result_json(const std::string& verdict, const CampaignOptions& options, const CampaignResult& r,
                 const std::vector<std::string>& replay_files, const std::string& hint, const std::string& inconclusive) {
  Json json = {{"verdict", verdict},
               {"inconclusive", inconclusive.empty() ? Json() : Json(inconclusive)},
               {options.command ? "impl_cmd" : "impl", options.impl},
               {"impl_said", r.impl_said.empty() ? Json() : Json(r.impl_said)},
               {"seed", options.seed},
               {"cases", r.cases},
               {"properties", r.per_property.size()},
               {"seconds", r.total_seconds()},
               {"start_seconds", r.start_seconds},
               {"search_seconds", r.seconds},
               {"shrink_seconds", r.shrink_seconds},
               {"examine_seconds", r.examine_seconds},
               {"calls", r.calls},
               {"calls_not_taken", r.not_taken},
               {"not_taken_reasons", r.not_taken_reasons},
               {"not_taken_runs", r.not_taken_runs},
               {"runs_stopped_by_the_budget", r.cut_runs},
               {"domain", domain_json(r.domain)},
               {"policy_hint", hint.empty() ? Json() : Json(hint)},
               {"cases_per_second", r.seconds > 0 ? double(r.cases) / r.seconds : 0.0},
               {"largest_error_bound_ratio", number_json(r.reported_ratio())},
               {"per_property", r.per_property},
               {"per_property_seconds", r.per_property_seconds},
               {"arithmetic", r.found                ? "FAIL"
                              : inconclusive.empty() ? "PASS"
                                                     : "INCONCLUSIVE"},
               {"floating_point_mode", r.fp_mode.empty() ? Json() : Json(r.fp_mode)},
               {"abi_version", r.abi_version},
               {"checked", features_named(coverage(r.capabilities, options).checked)},
               {"claimed_not_checked", features_named(coverage(r.capabilities, options).unchecked)},
               {"not_claimed", features_named(coverage(r.capabilities, options).not_claimed)},
               {"not_applicable", r.not_applicable},
               {"policies", policies_json(options.policies)}};
  Json findings = Json::array();
  for (size_t n = 0; n < r.findings.size(); ++n) {
    const Finding& f = r.findings[n];
    findings.push_back(finding_json(f, n < replay_files.size() ? replay_files[n] : ""));
  }
  if (r.found) json["finding"] = findings.front();  // the first, as before --keep-going
  json["findings"] = findings;
  return json;
}

void write_json(const std::string& path, const Json& json) {
  std::ofstream file(path);
  file << json.dump(2, ' ', false, Json::error_handler_t::replace) << '\n';  // a byte not UTF-8: U+FFFD, never a throw
  file.close();
  if (!file) throw std::runtime_error(path + ": cannot write (" + std::strerror(errno) + ")");
}

void write_junit(const std::string& path, const CampaignResult& r, const std::vector<std::string>& reports,
                 const std::string& summary) {
  std::string cases;
  int failures = 0, tests = 0;
  auto failure = [&](const std::string& headline, const std::string& text) {
    ++failures;
    return "\n    <failure message=\"" + markup_escaped(headline.substr(0, headline.find('\n'))) + "\">" + markup_escaped(text) +
           "</failure>\n  ";
  };
  char seconds[32];
  auto testcase = [&](const std::string& name, const char* time, const std::string& failed) {
    ++tests;
    cases += "  <testcase classname=\"attncheck\" name=\"" + markup_escaped(name) + "\" time=\"" + time + "\">" + failed +
             "</testcase>\n";
  };
  for (const auto& [name, count] : r.per_property) {
    const auto time = r.per_property_seconds.find(name);
    std::snprintf(seconds, sizeof seconds, "%.3f", time == r.per_property_seconds.end() ? 0.0 : time->second);
    // The property's first finding is its failure; another of it (another kind) is a test case of its own.
    bool first = true;
    std::string failed;
    for (size_t n = 0; n < r.findings.size() && n < reports.size(); ++n) {
      if (r.findings[n].property != name) continue;
      if (first)
        failed = failure(r.findings[n].message, reports[n]);
      else
        testcase(name + " (" + r.findings[n].kind + ")", "0", failure(r.findings[n].message, reports[n]));
      first = false;
    }
    testcase(name, seconds, failed);
  }
  if (!r.fp_mode.empty()) testcase("floating-point mode", "0", failure(r.fp_mode, r.fp_mode));
  std::snprintf(seconds, sizeof seconds, "%.3f", r.seconds + r.shrink_seconds);
  std::ofstream file(path);
  file << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"attncheck check\" tests=\"" << tests
       << "\" failures=\"" << failures << "\" errors=\"0\" skipped=\"0\" time=\"" << seconds << "\">\n"
       << cases << "  <system-out>" << markup_escaped(summary) << "</system-out>\n</testsuite>\n</testsuites>\n";
  file.close();
  if (!file) throw std::runtime_error(path + ": cannot write (" + std::strerror(errno) + ")");
}

}  // namespace attncheck
