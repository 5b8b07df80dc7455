// attncheck check: the whole property suite against an implementation, in a child process, within
// a time budget; or a replay file's counterexample run again.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <sched.h>
#include <signal.h>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "attncheck/abi.hpp"
#include "attncheck/campaign.hpp"
#include "attncheck/plugin.h"
#include "attncheck/commands.hpp"
#include "attncheck/diagnosis.hpp"
#include "attncheck/domain.hpp"
#include "attncheck/features.hpp"
#include "attncheck/finding_view.hpp"
#include "attncheck/flags.hpp"
#include "attncheck/html_report.hpp"
#include "attncheck/implementation.hpp"
#include "attncheck/policy_flags.hpp"
#include "attncheck/printable.hpp"
#include "attncheck/property.hpp"
#include "attncheck/protocol.hpp"
#include "attncheck/report_writers.hpp"

namespace attncheck {
namespace {

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

// A word as a POSIX shell reads it back: as it is when it holds nothing the shell treats specially.
std::string shell_quoted(const std::string& word) {
  if (!word.empty() &&
      word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == std::string::npos)
    return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
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

// The campaign's options from check's flags; whether --impl or --impl-cmd named the implementation
// (else a replay file names it).
bool read_options(const FlagValues& o, CampaignOptions& options) {
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
  return named;
}

// On a terminal, one line rewritten in place at most four times a second (and as shrinking
// starts), erased before the verdict (`shown` says there is one to erase).
std::function<void(const CampaignOptions::Progress&)> progress_line(const CampaignOptions& options, bool& shown) {
  return [&options, &shown, last = -1.0](const CampaignOptions::Progress& p) mutable {
    if (!p.shrinking && last >= 0 && p.seconds - last < 0.25) return;
    last = p.seconds;
    if (p.shrinking)
      std::printf("\r\033[Kattncheck check: a counterexample after %lld cases, %.1f s; shrinking it (up to %g s)",
                  (long long)p.cases, p.seconds, options.shrink_seconds);
    else
      std::printf("\r\033[Kattncheck check: %zu properties, %lld cases, %.1f s of %g s", p.properties, (long long)p.cases,
                  p.seconds, options.seconds);
    std::fflush(stdout);
    shown = true;
  };
}

// --replay's one run: the file's counterexample again, under the file's policies unless a flag
// overrides one.
CampaignResult replay_file(const FlagValues& o, CampaignOptions& options, bool named) {
  const Finding recorded = read_replay(o.text("replay"), options, named);
  read_policy_flags(o, options.policies);  // a policy given overrides the file's
  if (!named) require_trusted(o, o.text("replay"), options);
  CampaignResult result = replay(options, recorded);
  result.per_property_seconds[recorded.property] = result.seconds;  // its one run
  return result;
}

// The floating-point mode is a finding of its own; the arithmetic's verdict is given beside it. A
// run that found nothing but could not check enough (`why_inconclusive`) is inconclusive, never a pass.
std::string verdict_of(const CampaignResult& result, const std::string& why_inconclusive) {
  const std::string arithmetic = result.found ? "FAIL" : why_inconclusive.empty() ? "PASS" : "INCONCLUSIVE";
  const std::string finished =
      result.fp_mode.empty() ? arithmetic : "FAIL: the floating-point mode (the arithmetic: " + arithmetic + ")";
  return protocol::stop_requested() ? "INTERRUPTED (" + finished + " so far)" : finished;
}

// The command that replays a finding's replay file on the implementation checked.
std::string replay_command(const CampaignOptions& options, const std::string& file) {
  return std::string("attncheck check ") + (options.command ? "--impl-cmd " : "--impl ") + shell_quoted(options.impl) +
         " --replay " + shell_quoted(file);
}

// An output that cannot be written (a full disk) is said on stderr; the findings are still
// printed in full and every other output written, and the exit is 2.
struct Outputs {
  std::vector<std::string> unwritten;
  // Whether `write`, which writes `path`, did so.
  bool written(const std::string& path, const std::function<void()>& write) {
    try {
      write();
      return true;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "attncheck check: %s\n", e.what());
      unwritten.push_back(path);
      return false;
    }
  }
};

// What the run says: printed, and written into the --json, --junit and --html files.
struct Said {
  std::string verdict, why_inconclusive, hint, checked, summary;
  // Each finding's report as printed and its replay file (empty when none could be written); JUnit's
  // failures carry them too, the HTML report the command that replays each.
  std::vector<std::string> reports, replay_files;
  int earlier = 0;  // replay files of earlier runs moved aside
};

// Each finding's report and replay file. A replay's one finding is the file's; a campaign's are
// written now, into --counterexample, or with --keep-going each into --counterexample-dir.
void report_findings(const FlagValues& o, const CampaignOptions& options, const CampaignResult& result, Said& said,
                     Outputs& outputs) {
  if (result.found && o.given("replay")) {
    said.reports.push_back(diagnosis_text(result.finding.diagnosis) + result.finding.message);
    said.replay_files.push_back(o.text("replay"));
  } else if (result.found) {
    for (size_t n = 0; n < result.findings.size(); ++n) {
      const Finding& f = result.findings[n];
      std::string file =
          options.keep_going ? finding_file(o.text("counterexample-dir"), f, said.replay_files) : o.text("counterexample");
      std::string kept = "\nreplay it: " + replay_command(options, file);
      if (!outputs.written(file, [&] { write_replay(file, options, f, result.domain); })) {
        kept = "\n(no replay file: " + file + " could not be written; the case is the one above)";
        file.clear();
      }
      const std::string heading = options.keep_going ? "finding " + std::to_string(n + 1) + " of " +
                                                           std::to_string(result.findings.size()) + " (" + f.kind + "): "
                                                     : "";
      said.reports.push_back(heading + "counterexample to Property." + f.property + " (" + case_note(f) + "), " + f.format +
                             ", error/bound " + ratio_text(f.ratio) + ":\n" + diagnosis_text(f.diagnosis) + f.message + kept);
      said.replay_files.push_back(file);
    }
  } else if (o.given("replay") && said.why_inconclusive.empty()) {
    std::printf("the recorded counterexample to Property.%s no longer fails (%lld runs)\n",
                result.per_property.begin()->first.c_str(), (long long)result.cases);
  }
}

// The "checked" line: what the command said as it started (an adapter: the library it calls), what
// of the kernel's claims the run checked, what it skipped, and the policies it assumed.
std::string checked_line(const CampaignResult& result, const CampaignOptions& options) {
  const Coverage covered = coverage(result.capabilities, options);
  const std::string& said = result.impl_said;  // its last line: an adapter's library and version, after any import's warnings
  return (said.empty() ? "" : "the command said as it started: " + said.substr(said.rfind('\n') + 1) + "\n") +
         "checked: " + feature_names(covered.checked) + " (ABI v" + std::to_string(result.abi_version) +
         ((result.capabilities & kLayerOnly) ? "; the multi-head layer alone" : "") + ")" +
         (result.domain.restrictions ? "; restricted to: " + domain_text(result.domain) : "") +
         (covered.unchecked ? "; claimed, not checked: " + feature_names(covered.unchecked) : "") +
         "; not claimed: " + feature_names(covered.not_claimed) + unknown_bits(result.capabilities) + skipped(result) +
         "\npolicies: " + policies_said(options.policies);
}

// The lines after the findings' reports: the table of findings, the hint, why the run is
// inconclusive, the earlier runs' replay files moved, an interruption, the checked line and the summary.
void print_conclusion(const FlagValues& o, const CampaignOptions& options, const CampaignResult& result, const Said& said) {
  if (options.keep_going) std::printf("%s", findings_table(result).c_str());
  if (!said.hint.empty()) std::printf("hint: %s\n", said.hint.c_str());
  if (!said.why_inconclusive.empty()) std::printf("inconclusive: %s\n", said.why_inconclusive.c_str());
  if (said.earlier > 0)
    std::printf("replay files of earlier runs moved to %s: %d\n",
                (std::filesystem::path(o.text("counterexample-dir")) / "earlier-runs").c_str(), said.earlier);
  if (protocol::stop_requested()) std::printf("interrupted: what was found so far is written\n");
  std::printf("%s\n%s\n", said.checked.c_str(), said.summary.c_str());
}

// The --json, --junit and --html files asked for.
void write_reports(const FlagValues& o, const CampaignOptions& options, const CampaignResult& result, const Said& said,
                   Outputs& outputs) {
  if (o.given("json"))
    outputs.written(o.text("json"), [&] {
      Json json = result_json(said.verdict, options, result, said.replay_files, said.hint, said.why_inconclusive);
      json["interrupted"] = protocol::stop_requested();
      json["replay_files_moved_aside"] = said.earlier;
      write_json(o.text("json"), json);
    });
  if (o.given("junit"))
    outputs.written(o.text("junit"),
                    [&] { write_junit(o.text("junit"), result, said.reports, said.checked + "\n" + said.summary); });
  if (o.given("html"))
    outputs.written(o.text("html"), [&] {
      std::vector<std::string> replays;
      for (const std::string& file : said.replay_files) replays.push_back(replay_command(options, file));
      write_html_report(o.text("html"), options, result, finding_views(options, result),
                        {said.verdict, said.summary, said.checked, replays});
    });
}

int check(const FlagValues& o) {
  CampaignOptions options;
  const bool named = read_options(o, options);
  // Every file the run writes, checked before the campaign: a path that cannot be written would
  // otherwise cost the whole budget, then hide the verdict behind exit 2.
  for (const char* flag : {"json", "junit", "html", "counterexample"})
    if (o.given(flag) || (std::string(flag) == "counterexample" && !o.given("replay") && !options.keep_going))
      require_writable(flag, o.text(flag));
  Said said;
  said.earlier = options.keep_going && !o.given("replay") ? prepare_findings_folder(o.text("counterexample-dir")) : 0;
  stop_on_signals();
  bool progress_shown = false;  // into a pipe or a file, no progress line
  if (isatty(STDOUT_FILENO)) options.progress = progress_line(options, progress_shown);
  const CampaignResult result = o.given("replay") ? replay_file(o, options, named) : run_campaign(options);
  if (progress_shown) std::printf("\r\033[K");
  said.why_inconclusive = result.found ? "" : inconclusive(result);
  said.verdict = verdict_of(result, said.why_inconclusive);
  if (!result.fp_mode.empty()) std::printf("floating-point mode: %s\n", result.fp_mode.c_str());
  Outputs outputs;
  report_findings(o, options, result, said, outputs);
  for (const std::string& report : said.reports) std::printf("%s\n", report.c_str());
  said.hint = result.findings.size() > 1 || options.keep_going ? policy_hint(result.findings) : "";
  said.checked = checked_line(result, options);
  said.summary = summary(said.verdict, result, options.policies);
  print_conclusion(o, options, result, said);
  write_reports(o, options, result, said, outputs);
  if (protocol::stop_requested()) return kInterrupted;
  if (!outputs.unwritten.empty()) return 2;
  if (result.found || !result.fp_mode.empty()) return 1;
  return said.why_inconclusive.empty() ? 0 : kInconclusive;
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

}  // namespace attncheck
