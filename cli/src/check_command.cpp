// attncheck check: the whole property suite against an implementation, in a child process, within
// a time budget; and attncheck mutants: the same against every planted bug (the kill matrix).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <signal.h>
#include <sched.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>

#include "attncheck/abi.hpp"
#include "attncheck/campaign.hpp"
#include "attncheck/plugin.h"
#include "attncheck/commands.hpp"
#include "attncheck/diagnosis.hpp"
#include "attncheck/domain.hpp"
#include "attncheck/features.hpp"
#include "attncheck/flags.hpp"
#include "attncheck/html_report.hpp"
#include "attncheck/implementation.hpp"
#include "attncheck/policy_flags.hpp"
#include "attncheck/printable.hpp"
#include "attncheck/property.hpp"
#include "attncheck/protocol.hpp"

namespace attncheck {
namespace {

using Json = nlohmann::ordered_json;

// The exit code of a run that found nothing but could not check enough (inconclusive): neither a
// pass (0) nor a finding (1) nor an error (2); and of one stopped by SIGINT or SIGTERM, which
// wrote what it had found (the shell's 128 + SIGINT).
constexpr int kInconclusive = 3, kInterrupted = 130;

// The cores this process may run on (its affinity mask), at least 1.
int cores_available() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? std::max(1, CPU_COUNT(&set)) : 1;
}

// Where the run's seconds went: "60.4 s (0.3 starting, 51.2 searching, 6.8 shrinking, 2.1 examining)".
std::string seconds_spent(const CampaignResult& r) {
  char text[160];
  std::snprintf(text, sizeof text, "%.1f s", r.total_seconds());
  std::string parts;
  for (const auto& [seconds, what] : {std::pair{r.start_seconds, "starting"},
                                      {r.seconds, "searching"},
                                      {r.shrink_seconds, "shrinking"},
                                      {r.examine_seconds, "examining"}}) {
    if (seconds < 0.05 && std::string(what) != "searching") continue;
    char part[48];
    std::snprintf(part, sizeof part, "%s%.1f %s", parts.empty() ? "" : ", ", seconds, what);
    parts += part;
  }
  return std::string(text) + (r.replayed ? "" : " (" + parts + ")");
}

// The calls the kernel did not take, when any: "; taken 4,980 of 5,114 calls; not taken 134
// (upper-left causal with Tq != Tk)", the commonest reasons first.
std::string calls_taken(const CampaignResult& r) {
  if (r.not_taken == 0) return "";
  std::vector<std::pair<int64_t, std::string>> reasons;
  for (const auto& [reason, count] : r.not_taken_reasons) reasons.push_back({-count, reason});
  std::sort(reasons.begin(), reasons.end());
  std::string why;
  for (size_t n = 0; n < reasons.size() && n < 3; ++n)
    why += (n ? "; " : "") + reprintable(reasons[n].second, 100) + (reasons.size() > 1 ? ": " + grouped(-reasons[n].first) : "");
  return "; taken " + grouped(r.calls - r.not_taken) + " of " + grouped(r.calls) + " calls; not taken " + grouped(r.not_taken) +
         " (" + why + (reasons.size() > 3 ? "; ..." : "") + ")";
}

// The one-line summary of a campaign: verdict, cases, properties, seconds and where they went,
// rate, largest error/bound (the worst finding's, when there is one), the calls not taken.
std::string summary(const std::string& verdict, const CampaignResult& r, const Policies& policies) {
  const std::string relaxed = relaxed_flags(policies);
  const double worst = r.reported_ratio();
  return "attncheck check: " + verdict + ": " + grouped(r.cases) + " cases, " + std::to_string(r.per_property.size()) +
         " properties, " + seconds_spent(r) + ", " + grouped(int64_t(r.seconds > 0 ? double(r.cases) / r.seconds : 0.0)) +
         " cases/s, largest error/bound " + ratio_text(worst) + (r.found && worst < 1 ? " (not how the finding fails)" : "") +
         calls_taken(r) + (relaxed.empty() ? "" : "; under " + relaxed);
}

// Why a run that found nothing is no pass (empty when it is one): fewer than half its calls taken,
// or a property that applies never finished a run (the budget ended first, or its calls were not
// taken).
std::string inconclusive(const CampaignResult& r) {
  if (r.replayed)  // a replay whose case sends nothing: no verdict, never "no longer fails"
    return r.found || r.calls > r.not_taken ? "" : "the recorded case sent the kernel no call it took: nothing was checked";
  if (r.calls > 0 && 2 * (r.calls - r.not_taken) < r.calls)
    return "fewer than half the calls were taken (" + grouped(r.calls - r.not_taken) + " of " + grouped(r.calls) +
           "): the kernel cannot take most of what it claims; say what it takes with its restrictions";
  std::string never, none_taken;
  for (const Property& p : all_properties()) {
    if (r.not_applicable.count(p.name) || r.per_property.count(p.name)) continue;
    (r.not_taken_runs.count(p.name) ? none_taken : never) += std::string(", ") + p.name;
  }
  std::string why;
  if (!never.empty())
    why = "applicable properties never ran (the budget ended first: a longer --seconds runs them): " + never.substr(2);
  if (!none_taken.empty())
    why +=
        (why.empty() ? "" : "; ") + std::string("applicable properties whose every call was not taken: ") + none_taken.substr(2);
  return why;
}

// The run's one hint: the combination of policies that accepts the most findings, with the fewest
// rules relaxed ("every finding but 1 is accepted under --empty-rows any --masked-inputs finite");
// empty when no policy accepts any.
std::string policy_hint(const std::vector<Finding>& findings) {
  int best = -1, accepted = 0;
  for (int n = 1; n < policy_combinations(); ++n) {
    int count = 0;
    for (const Finding& f : findings) count += (f.diagnosis.accepting >> n) & 1;
    if (count > accepted ||
        (count == accepted && count > 0 && relaxed_count(policy_combination(n)) < relaxed_count(policy_combination(best))))
      best = n, accepted = count;
  }
  if (accepted == 0) return "";
  const int left = int(findings.size()) - accepted;
  const std::string which = left == 0         ? (findings.size() == 1 ? "the finding is" : "every finding is")
                            : accepted > left ? "every finding but " + std::to_string(left) + " is"
                                              : std::to_string(accepted) + " of " + std::to_string(findings.size()) +
                                                    (accepted == 1 ? " findings is" : " findings are");
  return which + " accepted under " + relaxed_flags(policy_combination(best)) +
         (left == 0 ? ": the kernel follows those conventions (docs/contract.md, \"Policies\")" : "");
}

// The features among `bits`, by name (the feature table's order), as the JSON says them.
std::vector<std::string> features_named(uint32_t bits) {
  std::vector<std::string> names;
  for (const Feature& f : features())
    if (bits & f.capability) names.push_back(f.name);
  return names;
}

// The kernel's claims, split three ways: exercised by the campaign; claimed but left out (a
// format --dtype leaves out, the backward under --backward off); not claimed.
struct Coverage {
  uint32_t checked, unchecked, not_claimed;
};
Coverage coverage(uint32_t claimed, const CampaignOptions& options) {
  const uint32_t all = all_capabilities(), exercised = checked_capabilities(claimed, options);
  return {exercised & all, claimed & all & ~exercised, ~claimed & all};
}

// What a verdict assumed: the strict contract, or each policy that relaxes one of its rules.
std::string policies_said(const Policies& policies) {
  const std::string relaxed = relaxed_text(policies);
  return relaxed.empty() ? "the strict contract (" + policies_text(policies) + ")" : relaxed;
}

// The properties a campaign skipped as not applicable to the kernel's claims, for the "checked" line,
// grouped by why: "\nskipped, not applicable: needs causal: CausalPrefixIgnoresTheFuture; checks f64:
// AgreesWithOracleInDouble, ..." (empty for none).
std::string skipped(const CampaignResult& r) {
  std::map<std::string, std::string> by_reason;
  std::map<std::string, int> counts;
  for (const auto& [property, why] : r.not_applicable) {
    by_reason[why] += (by_reason[why].empty() ? "" : ", ") + property;
    ++counts[why];
  }
  std::string text;
  for (const auto& [why, properties] : by_reason)  // a layer alone skips every forward property: counted, not named
    text += (text.empty() ? "\nskipped, not applicable: " : "; ") + why + ": " +
            (why == kLayerOnlySkip ? std::to_string(counts[why]) + " properties" : properties);
  return text;
}

// Throws a one-line error unless `path` can be written: the file, when it is there, or else its
// folder.
void require_writable(const std::string& flag, const std::string& path) {
  const std::string folder =
      std::filesystem::path(path).has_parent_path() ? std::filesystem::path(path).parent_path().string() : ".";
  const bool there = access(path.c_str(), F_OK) == 0;
  std::error_code ignored;  // a FIFO would block the writer for ever, a folder cannot be a file
  if (there && !std::filesystem::is_regular_file(path, ignored))
    throw std::runtime_error("--" + flag + " " + path + ": not a regular file");
  if (access(there ? path.c_str() : folder.c_str(), W_OK) != 0)
    throw std::runtime_error("--" + flag + " " + path + ": cannot write there (" + std::strerror(errno) + ")");
}

// Capability bits the kernel claims that no feature has, for the "checked" line: "; claimed bits
// this attncheck does not know, ignored: 0xffff0000" (empty when there are none).
std::string unknown_bits(uint32_t claimed) {
  const uint32_t unknown = claimed & ~all_capabilities() & ~kLayerOnly;
  if (!unknown) return "";
  char bits[16];
  std::snprintf(bits, sizeof bits, "0x%08x", unknown);
  return std::string("; claimed bits this attncheck does not know, ignored: ") + bits;
}

// The --dtype words: the formats' rows.
std::vector<std::string> format_words() {
  std::vector<std::string> words;
  for (const Feature& f : features())
    if (f.capability & kFormatCapabilities) words.push_back(f.word);
  return words;
}

// A number as JSON, NaN and inf as strings (JSON's numbers hold neither): an error/bound of a wrong
// special value is "inf".
Json number_json(double x) { return std::isfinite(x) ? Json(x) : Json(std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf"); }

// The shape line of a finding's case ("B 1 H 1 H_kv 1 Tq 1 Tk 2 dk 1 dv 1"), or what it has instead.
std::string shrunk_shape(const Finding& f) {
  const size_t at = f.case_text.find("\nshape ");
  if (at == std::string::npos) return f.hung ? "not shrunk: it hung" : "its own fixed case";
  return f.case_text.substr(at + 7, f.case_text.find('\n', at + 1) - at - 7) + (f.hung ? " (not shrunk: it hung)" : "");
}

// Where --keep-going writes a finding's replay file: DIR/Property.kind.format.replay, the kind's
// words joined by '-', and -2, -3... after it when an earlier finding of this run took the name
// (one kind of one property, a convention and a bug beside it).
std::string finding_file(const std::string& dir, const Finding& f, const std::vector<std::string>& taken) {
  std::string kind = f.kind;
  for (char& c : kind) c = c == ' ' ? '-' : c;
  const std::string stem = (std::filesystem::path(dir) / (f.property + "." + kind + "." + f.format)).string();
  std::string path = stem + ".replay";
  for (int n = 2; std::find(taken.begin(), taken.end(), path) != taken.end(); ++n)
    path = stem + "-" + std::to_string(n) + ".replay";
  return path;
}

// Every finding of a --keep-going campaign at a glance: what broke, the property, the shrunk shape,
// the error/bound.
std::string findings_table(const CampaignResult& r) {
  std::string table = "findings: " + std::to_string(r.findings.size()) + (r.findings.empty() ? "\n" : "\n");
  char line[512];
  for (size_t n = 0; n < r.findings.size(); ++n) {
    const Finding& f = r.findings[n];
    std::snprintf(line, sizeof line, "  %2zu  %-37s %-52s %-42s %s %s\n", n + 1, f.kind.c_str(),
                  ("Property." + f.property).c_str(), shrunk_shape(f).c_str(), f.format.c_str(), ratio_text(f.ratio).c_str());
    table += line;
  }
  return table;
}

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

Json result_json(const std::string& verdict, const CampaignOptions& options, const CampaignResult& r,
                 const std::vector<std::string>& replay_files, const std::string& hint, const std::string& inconclusive) {
  Json json = {{"verdict", verdict},
               {"inconclusive", inconclusive.empty() ? Json() : Json(inconclusive)},
               {options.command ? "impl_cmd" : "impl", options.impl},
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

// A word as a POSIX shell reads it back: as it is when it holds nothing the shell treats specially.
std::string shell_quoted(const std::string& word) {
  if (!word.empty() &&
      word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == std::string::npos)
    return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

void write_json(const std::string& path, const Json& json) {
  std::ofstream file(path);
  file << json.dump(2, ' ', false, Json::error_handler_t::replace) << '\n';  // a byte not UTF-8: U+FFFD, never a throw
  file.close();
  if (!file) throw std::runtime_error(path + ": cannot write (" + std::strerror(errno) + ")");
}

// JUnit XML for CI: one test case per property that ran (its seconds summed over its runs), the
// finding as its property's failure with the report as printed, and a floating-point-mode finding
// as a failing test case of its own.
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

// The --counterexample-dir of a --keep-going run, made if missing and checked before the campaign.
// The replay files earlier runs left there move to its earlier-runs/ folder, so that every *.replay
// in it is this run's (a later pass leaves no old finding looking current); returns how many moved.
int prepare_findings_folder(const std::string& dir) {
  std::error_code error;  // a folder that cannot be made is said by the checks below
  std::filesystem::create_directories(dir, error);
  if (!std::filesystem::is_directory(dir, error)) throw std::runtime_error("--counterexample-dir " + dir + ": not a folder");
  if (access(dir.c_str(), W_OK) != 0)
    throw std::runtime_error("--counterexample-dir " + dir + ": cannot write there (" + std::strerror(errno) + ")");
  int moved = 0;
  const std::filesystem::path aside = std::filesystem::path(dir) / "earlier-runs";
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (!entry.is_regular_file(error) || entry.path().extension() != ".replay") continue;
    std::filesystem::create_directories(aside, error);
    std::filesystem::path to = aside / entry.path().filename();
    for (int n = 2; std::filesystem::exists(to, error); ++n)
      to = aside / (entry.path().stem().string() + "-" + std::to_string(n) + ".replay");
    std::filesystem::rename(entry.path(), to, error);
    if (error)
      throw std::runtime_error("--counterexample-dir " + dir + ": cannot move an earlier run's " +
                               entry.path().filename().string() + " aside (" + error.message() + ")");
    ++moved;
  }
  return moved;
}

// Ctrl-C or SIGTERM: every call and wait ends (protocol::request_stop), the run ends as at its
// budget's end and writes what it found, marked interrupted; a second signal ends it at once.
void stop_on_signals() {
  struct sigaction stop {};
  stop.sa_handler = [](int) { protocol::request_stop(); };
  stop.sa_flags = SA_RESETHAND;
  sigemptyset(&stop.sa_mask);
  sigaction(SIGINT, &stop, nullptr);
  sigaction(SIGTERM, &stop, nullptr);
}

int check(const FlagValues& o) {
  CampaignOptions options;
  const bool named = named_implementation(o, options);
  options.seconds = o.number("seconds");
  options.max_cases = int64_t(o.number("cases"));
  options.shrink_seconds = o.number("shrink-seconds");
  options.seed = uint64_t(o.number("seed"));
  options.case_timeout = o.number("case-timeout");
  options.adaptive_timeout = !o.given("case-timeout");
  if (o.given("dtype")) {
    options.formats = ~kFormatCapabilities;
    for (const std::string& dtype : o.all("dtype"))
      for (const Feature& f : features())
        if ((f.capability & kFormatCapabilities) && dtype == f.word) options.formats |= f.capability;
  }
  read_policy_flags(o, options.policies);
  options.keep_going = o.on("keep-going");
  options.jobs = o.number("jobs") > 0 ? int(o.number("jobs")) : cores_available();
  options.backward = o.text("backward") != "off";
  options.require_backward = o.text("backward") == "on";
  const std::string& counterexample = o.text("counterexample");
  // Every file the run writes, checked before the campaign: a path that cannot be written would
  // otherwise cost the whole budget, then hide the verdict behind exit 2.
  for (const char* flag : {"json", "junit", "html", "counterexample"})
    if (o.given(flag) || (std::string(flag) == "counterexample" && !o.given("replay") && !options.keep_going))
      require_writable(flag, o.text(flag));
  const int earlier = options.keep_going && !o.given("replay") ? prepare_findings_folder(o.text("counterexample-dir")) : 0;
  stop_on_signals();

  // On a terminal, one line rewritten in place at most four times a second (and as shrinking
  // starts), erased before the verdict; into a pipe or a file, nothing.
  bool progress_shown = false;
  if (isatty(STDOUT_FILENO))
    options.progress = [&, last = -1.0](const CampaignOptions::Progress& p) mutable {
      if (!p.shrinking && last >= 0 && p.seconds - last < 0.25) return;
      last = p.seconds;
      if (p.shrinking)
        std::printf("\r\033[Kattncheck check: a counterexample after %lld cases, %.1f s; shrinking it (up to %g s)",
                    (long long)p.cases, p.seconds, options.shrink_seconds);
      else
        std::printf("\r\033[Kattncheck check: %zu properties, %lld cases, %.1f s of %g s", p.properties, (long long)p.cases,
                    p.seconds, options.seconds);
      std::fflush(stdout);
      progress_shown = true;
    };

  CampaignResult result;
  if (o.given("replay")) {
    const Finding recorded = read_replay(o.text("replay"), options, named);
    read_policy_flags(o, options.policies);  // a policy given overrides the file's
    if (!named) require_trusted(o, o.text("replay"), options);
    result = replay(options, recorded);
    result.per_property_seconds[recorded.property] = result.seconds;  // its one run
  } else {
    result = run_campaign(options);
  }
  if (progress_shown) std::printf("\r\033[K");
  // The floating-point mode is a finding of its own; the arithmetic's verdict is given beside it. A
  // run that found nothing but could not check enough is inconclusive, never a pass.
  const std::string why_inconclusive = result.found ? "" : inconclusive(result);
  const std::string arithmetic = result.found ? "FAIL" : why_inconclusive.empty() ? "PASS" : "INCONCLUSIVE";
  const std::string finished =
      result.fp_mode.empty() ? arithmetic : "FAIL: the floating-point mode (the arithmetic: " + arithmetic + ")";
  const std::string verdict = protocol::stop_requested() ? "INTERRUPTED (" + finished + " so far)" : finished;
  if (!result.fp_mode.empty()) std::printf("floating-point mode: %s\n", result.fp_mode.c_str());
  // Each finding's report as printed, its replay file and the command that replays it; JUnit's
  // failures carry them too. A replay's one finding is the file's; a campaign's are written now.
  std::vector<std::string> reports, replay_files;
  auto replay_command = [&](const std::string& file) {
    return std::string("attncheck check ") + (options.command ? "--impl-cmd " : "--impl ") + shell_quoted(options.impl) +
           " --replay " + shell_quoted(file);
  };
  auto replay_commands = [&](const std::vector<std::string>& files) {
    std::vector<std::string> commands;
    for (const std::string& file : files) commands.push_back(replay_command(file));
    return commands;
  };
  // An output that cannot be written (a full disk) is said on stderr; the findings are still
  // printed in full and every other output written, and the exit is 2.
  std::vector<std::string> unwritten;
  auto written = [&](const std::string& path, const std::function<void()>& write) {
    try {
      write();
      return true;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "attncheck check: %s\n", e.what());
      unwritten.push_back(path);
      return false;
    }
  };
  if (result.found && o.given("replay")) {
    reports.push_back(diagnosis_text(result.finding.diagnosis) + result.finding.message);
    replay_files.push_back(o.text("replay"));
  } else if (result.found) {
    for (size_t n = 0; n < result.findings.size(); ++n) {
      const Finding& f = result.findings[n];
      std::string file = options.keep_going ? finding_file(o.text("counterexample-dir"), f, replay_files) : counterexample;
      std::string kept = "\nreplay it: " + replay_command(file);
      if (!written(file, [&] { write_replay(file, options, f, result.domain); })) {
        kept = "\n(no replay file: " + file + " could not be written; the case is the one above)";
        file.clear();
      }
      const std::string heading = options.keep_going ? "finding " + std::to_string(n + 1) + " of " +
                                                           std::to_string(result.findings.size()) + " (" + f.kind + "): "
                                                     : "";
      reports.push_back(heading + "counterexample to Property." + f.property + " (" + case_note(f) + "), " + f.format +
                        ", error/bound " + ratio_text(f.ratio) + ":\n" + diagnosis_text(f.diagnosis) + f.message + kept);
      replay_files.push_back(file);
    }
  } else if (o.given("replay") && why_inconclusive.empty()) {
    std::printf("the recorded counterexample to Property.%s no longer fails (%lld runs)\n",
                result.per_property.begin()->first.c_str(), (long long)result.cases);
  }
  for (const std::string& report : reports) std::printf("%s\n", report.c_str());
  if (options.keep_going) std::printf("%s", findings_table(result).c_str());
  const std::string hint = result.findings.size() > 1 || options.keep_going ? policy_hint(result.findings) : "";
  if (!hint.empty()) std::printf("hint: %s\n", hint.c_str());
  const Coverage covered = coverage(result.capabilities, options);
  const std::string checked = "checked: " + feature_names(covered.checked) + " (ABI v" + std::to_string(result.abi_version) +
                              ((result.capabilities & kLayerOnly) ? "; the multi-head layer alone" : "") + ")" +
                              (result.domain.restrictions ? "; restricted to: " + domain_text(result.domain) : "") +
                              (covered.unchecked ? "; claimed, not checked: " + feature_names(covered.unchecked) : "") +
                              "; not claimed: " + feature_names(covered.not_claimed) + unknown_bits(result.capabilities) +
                              skipped(result) + "\npolicies: " + policies_said(options.policies);
  const std::string summary_line = summary(verdict, result, options.policies);
  if (!why_inconclusive.empty()) std::printf("inconclusive: %s\n", why_inconclusive.c_str());
  if (earlier > 0)
    std::printf("replay files of earlier runs moved to %s: %d\n",
                (std::filesystem::path(o.text("counterexample-dir")) / "earlier-runs").c_str(), earlier);
  if (protocol::stop_requested()) std::printf("interrupted: what was found so far is written\n");
  std::printf("%s\n%s\n", checked.c_str(), summary_line.c_str());
  if (o.given("json"))
    written(o.text("json"), [&] {
      Json json = result_json(verdict, options, result, replay_files, hint, why_inconclusive);
      json["interrupted"] = protocol::stop_requested();
      json["replay_files_moved_aside"] = earlier;
      write_json(o.text("json"), json);
    });
  if (o.given("junit"))
    written(o.text("junit"), [&] { write_junit(o.text("junit"), result, reports, checked + "\n" + summary_line); });
  if (o.given("html"))
    written(o.text("html"), [&] {
      write_html_report(o.text("html"), options, result, {verdict, summary_line, checked, replay_commands(replay_files)});
    });
  if (protocol::stop_requested()) return kInterrupted;
  if (!unwritten.empty()) return 2;
  if (result.found || !result.fp_mode.empty()) return 1;
  return why_inconclusive.empty() ? 0 : kInconclusive;
}

// Whether a case's "B 1 H 1 H_kv 1 Tq 2 Tk 3 dk 2 dv 1" is as small as a counterexample usually
// needs: B = H = 1, Tq and Tk at most 3, dk and dv at most 2 (issue 15's target).
bool at_most_tiny(const std::string& shape) {
  std::istringstream words(shape);
  std::map<std::string, int64_t> size;
  for (std::string name; words >> name;) words >> size[name];
  return size["B"] == 1 && size["H"] == 1 && size["Tq"] <= 3 && size["Tk"] <= 3 && size["dk"] <= 2 && size["dv"] <= 2;
}

int mutants(const FlagValues& o) {
  const std::string& folder = o.text("dir");
  std::vector<std::string> names;
  if (DIR* dir = opendir(folder.c_str())) {
    while (const dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.rfind("mutant_", 0) == 0 && name.size() > 3 && name.substr(name.size() - 3) == ".so") names.push_back(name);
    }
    closedir(dir);
  } else {
    throw std::runtime_error(folder + ": cannot open the folder");
  }
  if (names.empty()) throw std::runtime_error(folder + ": no mutant_*.so here");
  std::sort(names.begin(), names.end());

  CampaignOptions options;
  options.seconds = o.number("seconds");
  options.seed = uint64_t(o.number("seed"));
  options.shrink_seconds = o.number("shrink-seconds");
  std::printf("%-36s %-48s %8s %9s  %s\n", "mutant", "killed by", "cases", "seconds",
              options.shrink_seconds > 0 ? "shrunk to (seconds shrinking)" : "");
  Json matrix = Json::array();
  int survivors = 0, cases_shrunk = 0, minimal = 0;
  std::vector<double> times, shrink_times;
  for (const std::string& name : names) {
    options.impl = folder + "/" + name;
    const CampaignResult r = run_campaign(options);
    survivors += !r.found;
    if (r.found) times.push_back(r.seconds);
    const std::string mutant = name.substr(7, name.size() - 10);
    // The counterexample's shape, from its case's "shape B 1 H 1 ..." line; a fixed property's own
    // case (no shrinking) is marked so.
    const bool own = r.finding.case_text.empty() && !r.finding.last_call_case.empty();
    const std::string& text = own ? r.finding.last_call_case : r.finding.case_text;
    const size_t at = text.find("shape ");
    const std::string shape = !r.found || options.shrink_seconds == 0 || at == std::string::npos
                                  ? ""
                                  : text.substr(at + 6, text.find('\n', at) - at - 6) + (own ? " (its own)" : "");
    char shrinking[32] = "";
    if (r.found && options.shrink_seconds > 0) {
      std::snprintf(shrinking, sizeof shrinking, "%s(%.2f)", shape.empty() ? "" : " ", r.shrink_seconds);
      shrink_times.push_back(r.shrink_seconds);
      cases_shrunk += !shape.empty() && !own;
      minimal += !shape.empty() && !own && at_most_tiny(shape);
    }
    std::printf("%-36s %-48s %8lld %9.3f  %s%s\n", mutant.c_str(),
                r.found ? ("Property." + r.finding.property).c_str() : "SURVIVED", (long long)r.cases, r.seconds, shape.c_str(),
                shrinking);
    matrix.push_back({{"mutant", mutant},
                      {"killed_by", r.found ? Json(r.finding.property) : Json()},
                      {"seed", options.seed},
                      {"cases", r.cases},
                      {"seconds", r.seconds},
                      {"shrunk_shape", shape},
                      {"shrink_seconds", r.shrink_seconds}});
  }
  // The reference must not be flagged with the same budget.
  options.impl = "builtin";
  options.shrink_seconds = 10;
  const CampaignResult reference = run_campaign(options);
  std::sort(times.begin(), times.end());
  const double median = times.empty() ? 0 : times[times.size() / 2];
  std::printf("%-36s %-48s %8lld %9.3f\n", "(reference: built-in)",
              reference.found ? ("FLAGGED by Property." + reference.finding.property).c_str() : "not flagged",
              (long long)reference.cases, reference.seconds);
  std::printf("attncheck mutants: %s: %zu of %zu killed, median %.3f s, slowest %.3f s to kill\n",
              survivors == 0 && !reference.found ? "PASS" : "FAIL", names.size() - size_t(survivors), names.size(), median,
              times.empty() ? 0.0 : times.back());
  if (!shrink_times.empty()) {
    std::sort(shrink_times.begin(), shrink_times.end());
    std::printf("shrinking: median %.2f s, longest %.2f s; %d of %d shrunk cases at B = H = 1, Tq and Tk <= 3, dk and dv <= 2\n",
                shrink_times[shrink_times.size() / 2], shrink_times.back(), minimal, cases_shrunk);
  }
  if (reference.found) std::printf("%s\n", reference.finding.message.c_str());
  if (o.given("json"))
    write_json(o.text("json"), {{"mutants", matrix}, {"reference_flagged", reference.found}, {"median_seconds", median}});
  return survivors == 0 && !reference.found ? 0 : 1;
}

}  // namespace

int check_command(const std::vector<std::string>& args) {
  Flags flags("check");
  implementation_flags(flags);
  return policy_flags(flags)
      .number("seconds", "N",
              "the search's budget, from the kernel's loading on: the runs are one sequence for a seed, and it stops at "
              "the first that would start after the budget or whose property has taken longer than what is left; a case "
              "under way finishes (at least 0.1: a run of no case passes nothing)",
              "60", 0.1, 1e9)
      .number("cases", "N",
              "also stop after N property runs, whichever comes first: with a generous --seconds, a seed checks exactly "
              "the same cases on any machine (0: no count)",
              "0", 0, 1e12)
      .number("shrink-seconds", "N", "after a counterexample, this much more to make it small; a trial under way finishes", "10",
              0, 1e9)
      .number("seed", "S", "the campaign's seed", "1", 0, 1e9)
      .choice("dtype", format_words(),
              "check only these formats, of those the kernel claims (f16, bf16 and f32 run the float properties, f64 "
              "AgreesWithOracleInDouble); every claimed one when absent")
      .repeatable()
      .choice("backward", {"auto", "on", "off"},
              "check the backward pass (dq, dk, dv) too: when the kernel claims ATTNCHECK_CAP_BACKWARD (auto), always "
              "(on: a kernel without one is an error), or never (off)",
              "auto")
      .text("json", "FILE",
            "also write the verdict, the summary's figures, per-property counts and seconds and the finding as JSON")
      .text("junit", "FILE",
            "also write JUnit XML for CI: a test case per property run (its seconds), the finding as its failure")
      .text("html", "FILE",
            "also write a self-contained HTML report: heatmaps of the finding's mask, exact weights and error/bound, "
            "its tensors, the replay command, per-property counts")
      .text("replay", "FILE",
            "run a replay file's counterexample again, not a campaign, on --impl or --impl-cmd (or, with --trust-replay "
            "yes, the one it names); a policy flag given overrides its own")
      .text("counterexample", "FILE", "where the replay file of a counterexample goes", "attncheck-counterexample.replay")
      .boolean("keep-going",
               "run the whole budget and report every distinct finding once (by property, kind, format and raise "
               "type), each shrunk, each with its replay file in --counterexample-dir; without it the first finding "
               "stops the run")
      .text("counterexample-dir", "DIR", "with --keep-going yes, where each finding's replay file goes (made if missing)",
            "attncheck-findings")
      .number("jobs", "N",
              "run the campaign in N worker processes, each with its own kernel child, sharing one sequence of runs "
              "(with --cases, the same cases for any N); 0: one per core available (" +
                  std::to_string(cores_available()) + " here)",
              "0", 0, kMaxJobs)
      .number("case-timeout", "S",
              "seconds of CPU time one call may use, or spend blocked using none, before it counts as a hang; when "
              "not given, 30 s for the first call of each kind (format, features, forward, backward or layer), then ten "
              "times the CPU time of the slowest call so far of a problem at least as large, at least 1 s (3 s "
              "blocked), a call past it run again in a new child before it counts",
              "30", 0.01, 1e9)
      .run(args, check);
}

int mutants_command(const std::vector<std::string>& args) {
  return Flags("mutants")
      .text("dir", "DIR", "the folder of mutant_*.so, e.g. build/impl")
      .required()
      .number("seconds", "N", "each mutant's budget, and the built-in reference's: check's default", "60", 0.1, 1e9)
      .number("shrink-seconds", "S", "each counterexample's shrinking budget (the matrix shows its shape); 0 for none", "10", 0,
              1e9)
      .number("seed", "S", "every campaign's seed", "1", 0, 1e9)
      .text("json", "FILE", "also write the kill matrix as JSON")
      .run(args, mutants);
}

}  // namespace attncheck
