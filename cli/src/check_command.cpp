// attncheck check: the whole property suite against an implementation, in a child process, within
// a time budget; and attncheck mutants: the same against every planted bug (the kill matrix).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>

#include "attncheck/campaign.hpp"
#include "attncheck/commands.hpp"
#include "attncheck/property.hpp"

namespace attncheck {
namespace {

const char* const kCheckUsage =
    "usage: attncheck check [--impl builtin|PATH.so] [--seconds N] [--shrink-seconds N] [--seed S] "
    "[--precision f32|f64] [--empty-rows zero|nan] [--json FILE] [--replay FILE] [--counterexample FILE] "
    "[--case-timeout S]\n"
    "  --seconds N: the search's budget (default 60), from the kernel's loading on; no case starts after it, nor\n"
    "    one of a property that has taken longer than what is left; a case under way finishes\n"
    "  --shrink-seconds N: after a counterexample, at most this much more to make it small (default 10)\n"
    "  --precision f64: only the f64 property, AgreesWithOracleInDouble (the plugin needs attncheck_forward_f64)";
const char* const kMutantsUsage = "usage: attncheck mutants --dir DIR [--seconds N] [--seed S] [--json FILE]";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --flag value pairs, each flag one of `known`.
std::map<std::string, std::string> parse(const std::vector<std::string>& args, std::initializer_list<const char*> known) {
  std::map<std::string, std::string> options;
  for (size_t n = 0; n < args.size(); n += 2) {
    if (std::find_if(known.begin(), known.end(), [&](const char* k) { return args[n] == k; }) == known.end())
      throw UsageError("unknown option '" + args[n] + "'");
    if (n + 1 >= args.size()) throw UsageError(args[n] + " needs a value");
    options[args[n].substr(2)] = args[n + 1];
  }
  return options;
}

double number(const std::map<std::string, std::string>& options, const char* key, double fallback, double least) {
  if (!options.count(key)) return fallback;
  char* end = nullptr;
  const double x = std::strtod(options.at(key).c_str(), &end);
  if (*end != '\0' || !(x >= least) || x > 1e9) throw UsageError(std::string("--") + key + " must be a number >= " + std::to_string(least).substr(0, 3));
  return x;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') out += std::string("\\") + char(c);
    else if (c == '\n') out += "\\n";
    else if (c < 0x20) out += "\\u00" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    else out += char(c);
  }
  return out + "\"";
}

// A JSON number; null for inf and NaN, which JSON cannot hold (an infinite error/bound is common).
std::string json_number(double x) { return std::isfinite(x) ? std::to_string(x) : "null"; }

// The one-line summary of a campaign: verdict, cases, properties, seconds, rate, largest error/bound.
std::string summary(const char* verdict, const CampaignResult& r) {
  char line[400], shrinking[48] = "";
  if (r.found) std::snprintf(shrinking, sizeof shrinking, " + %.1f s shrinking", r.shrink_seconds);
  std::snprintf(line, sizeof line,
                "attncheck check: %s: %lld cases, %zu properties, %.1f s%s, %.0f cases/s, largest error/bound %.3g",
                verdict, (long long)r.cases, r.per_property.size(), r.seconds, shrinking,
                r.seconds > 0 ? double(r.cases) / r.seconds : 0.0, r.worst_ratio);
  return line;
}

std::string result_json(const char* verdict, const CampaignOptions& options, const CampaignResult& r,
                        const std::string& counterexample) {
  std::string json = "{\"verdict\": " + json_string(verdict) + ", \"impl\": " + json_string(options.impl) +
                     ", \"cases\": " + std::to_string(r.cases) + ", \"properties\": " + std::to_string(r.per_property.size()) +
                     ", \"seconds\": " + std::to_string(r.seconds) +
                     ", \"shrink_seconds\": " + std::to_string(r.shrink_seconds) +
                     ", \"cases_per_second\": " + std::to_string(r.seconds > 0 ? double(r.cases) / r.seconds : 0.0) +
                     ", \"largest_error_bound_ratio\": " + json_number(r.worst_ratio) + ", \"per_property\": {";
  bool first = true;
  for (const auto& [name, count] : r.per_property) {
    json += (first ? "" : ", ") + json_string(name) + ": " + std::to_string(count);
    first = false;
  }
  json += "}, \"arithmetic\": " + json_string(r.found ? "FAIL" : "PASS") +
          ", \"floating_point_mode\": " + (r.fp_mode.empty() ? "null" : json_string(r.fp_mode));
  if (r.found)
    json += ", \"finding\": {\"property\": " + json_string(r.finding.property) + ", \"message\": " +
            json_string(r.finding.message) + ", \"replay\": " + json_string(counterexample) + "}";
  return json + "}";
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream file(path);
  file << text << '\n';
  if (!file) throw UsageError(path + ": cannot write");
}

int check(const std::vector<std::string>& args) {
  const auto o = parse(args, {"--impl", "--seconds", "--shrink-seconds", "--seed", "--precision", "--empty-rows",
                              "--json", "--replay", "--counterexample", "--case-timeout"});
  CampaignOptions options;
  if (o.count("impl")) options.impl = o.at("impl");
  options.seconds = number(o, "seconds", 60, 0);
  options.shrink_seconds = number(o, "shrink-seconds", options.shrink_seconds, 0);
  options.seed = uint64_t(number(o, "seed", 1, 0));
  options.case_timeout = number(o, "case-timeout", options.case_timeout, 0.01);
  if (o.count("precision")) {
    if (o.at("precision") != "f32" && o.at("precision") != "f64") throw UsageError("--precision must be f32 or f64");
    options.f32 = o.at("precision") == "f32";
    options.f64 = o.at("precision") == "f64";
  }
  if (o.count("empty-rows")) {
    if (o.at("empty-rows") != "zero" && o.at("empty-rows") != "nan") throw UsageError("--empty-rows must be zero or nan");
    options.empty_rows = o.at("empty-rows") == "zero" ? EmptyRows::zero : EmptyRows::nan;
  }
  const std::string counterexample = o.count("counterexample") ? o.at("counterexample") : "attncheck-counterexample.replay";

  CampaignResult result;
  if (o.count("replay")) {
    const Finding recorded = read_replay(o.at("replay"), options, o.count("impl") > 0, o.count("empty-rows") > 0);
    result = replay(options, recorded);
  } else {
    result = run_campaign(options);
  }
  // The floating-point mode is a finding of its own; the arithmetic's verdict is given beside it.
  const std::string verdict = result.fp_mode.empty() ? (result.found ? "FAIL" : "PASS")
                              : std::string("FAIL: the floating-point mode (the arithmetic: ") +
                                    (result.found ? "FAIL" : "PASS") + ")";
  if (!result.fp_mode.empty()) std::printf("floating-point mode: %s\n", result.fp_mode.c_str());
  if (result.found && o.count("replay")) {
    std::printf("%s\n", result.finding.message.c_str());
  } else if (result.found) {
    write_replay(counterexample, options, result.finding);
    std::printf("counterexample to Property.%s (shrunk):\n%s\n", result.finding.property.c_str(),
                result.finding.message.c_str());
    std::printf("replay it: attncheck check --impl %s --replay %s\n", options.impl.c_str(), counterexample.c_str());
  } else if (o.count("replay")) {
    std::printf("the recorded counterexample to Property.%s no longer fails\n", result.per_property.begin()->first.c_str());
  }
  std::printf("%s\n", summary(verdict.c_str(), result).c_str());
  if (o.count("json")) write_file(o.at("json"), result_json(verdict.c_str(), options, result, counterexample));
  return result.found || !result.fp_mode.empty() ? 1 : 0;
}

int mutants(const std::vector<std::string>& args) {
  const auto o = parse(args, {"--dir", "--seconds", "--seed", "--json"});
  if (!o.count("dir")) throw UsageError("--dir is required (the folder of mutant_*.so, e.g. build/impl)");
  std::vector<std::string> names;
  if (DIR* dir = opendir(o.at("dir").c_str())) {
    while (const dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.rfind("mutant_", 0) == 0 && name.size() > 3 && name.substr(name.size() - 3) == ".so") names.push_back(name);
    }
    closedir(dir);
  } else {
    throw UsageError(o.at("dir") + ": cannot open the folder");
  }
  if (names.empty()) throw UsageError(o.at("dir") + ": no mutant_*.so here");
  std::sort(names.begin(), names.end());

  CampaignOptions options;
  options.seconds = number(o, "seconds", 10, 0);
  options.seed = uint64_t(number(o, "seed", 1, 0));
  options.shrink_seconds = 0;  // the matrix needs the killing property, not a small case
  std::printf("%-36s %-48s %8s %9s\n", "mutant", "killed by", "cases", "seconds");
  std::string json = "{\"mutants\": [";
  int survivors = 0;
  std::vector<double> times;
  for (const std::string& name : names) {
    options.impl = o.at("dir") + "/" + name;
    const CampaignResult r = run_campaign(options);
    survivors += !r.found;
    if (r.found) times.push_back(r.seconds);
    const std::string mutant = name.substr(7, name.size() - 10);
    std::printf("%-36s %-48s %8lld %9.3f\n", mutant.c_str(), r.found ? ("Property." + r.finding.property).c_str() : "SURVIVED",
                (long long)r.cases, r.seconds);
    json += std::string(json.back() == '[' ? "" : ", ") + "{\"mutant\": " + json_string(mutant) + ", \"killed_by\": " +
            (r.found ? json_string(r.finding.property) : "null") + ", \"cases\": " + std::to_string(r.cases) +
            ", \"seconds\": " + std::to_string(r.seconds) + "}";
  }
  // The reference must not be flagged with the same budget.
  options.impl = "builtin";
  options.shrink_seconds = 10;
  const CampaignResult reference = run_campaign(options);
  std::sort(times.begin(), times.end());
  const double median = times.empty() ? 0 : times[times.size() / 2];
  std::printf("%-36s %-48s %8lld %9.3f\n", "(reference: built-in)", reference.found ? ("FLAGGED by Property." + reference.finding.property).c_str() : "not flagged",
              (long long)reference.cases, reference.seconds);
  std::printf("attncheck mutants: %s: %zu of %zu killed, median %.3f s, slowest %.3f s to kill\n",
              survivors == 0 && !reference.found ? "PASS" : "FAIL", names.size() - size_t(survivors), names.size(), median,
              times.empty() ? 0.0 : times.back());
  if (reference.found) std::printf("%s\n", reference.finding.message.c_str());
  json += "], \"reference_flagged\": " + std::string(reference.found ? "true" : "false") +
          ", \"median_seconds\": " + std::to_string(median) + "}";
  if (o.count("json")) write_file(o.at("json"), json);
  return survivors == 0 && !reference.found ? 0 : 1;
}

// Runs a subcommand: a usage or loading problem is one line and exit 2.
int guarded(int (*command)(const std::vector<std::string>&), const std::vector<std::string>& args, const char* name,
            const char* usage) {
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    std::printf("%s\n", usage);
    return 0;
  }
  try {
    return command(args);
  } catch (const UsageError& e) {
    const std::string text = usage;
    std::fprintf(stderr, "attncheck %s: %s\n%s (--help for more)\n", name, e.what(), text.substr(0, text.find('\n')).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attncheck %s: %s\n", name, e.what());
  }
  return 2;
}

}  // namespace

int check_command(const std::vector<std::string>& args) { return guarded(check, args, "check", kCheckUsage); }
int mutants_command(const std::vector<std::string>& args) { return guarded(mutants, args, "mutants", kMutantsUsage); }

}  // namespace attncheck
