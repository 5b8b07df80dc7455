// attncheck mutants: the whole property suite against every planted bug (the kill matrix), and the
// built-in reference, which the same budget must not flag.
#include <algorithm>
#include <cstdio>
#include <dirent.h>
#include <map>
#include <sstream>
#include <stdexcept>
#include <set>
#include <string>
#include <vector>

#include "attncheck/campaign.hpp"
#include "attncheck/commands.hpp"
#include "attncheck/flags.hpp"
#include "attncheck/report_writers.hpp"

namespace attncheck {
namespace {

// Whether a case's "B 1 H 1 H_kv 1 Tq 2 Tk 3 dk 2 dv 1" is as small as a counterexample usually
// needs: B = H = 1, Tq and Tk at most 3, dk and dv at most 2 (issue 15's target).
bool at_most_tiny(const std::string& shape) {
  std::istringstream words(shape);
  std::map<std::string, int64_t> size;
  for (std::string name; words >> name;) words >> size[name];
  return size["B"] == 1 && size["H"] == 1 && size["Tq"] <= 3 && size["Tk"] <= 3 && size["dk"] <= 2 && size["dv"] <= 2;
}

// The mutants' plugins in `folder`, mutant_NAME.so, sorted; with `only`, just those NAMEs (each must
// be there).
std::vector<std::string> mutant_files(const std::string& folder, const std::vector<std::string>& only) {
  std::vector<std::string> names;
  DIR* dir = opendir(folder.c_str());
  if (!dir) throw std::runtime_error(folder + ": cannot open the folder");
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    const bool plugin = name.rfind("mutant_", 0) == 0 && name.size() > 10 && name.substr(name.size() - 3) == ".so";
    if (plugin && (only.empty() || std::count(only.begin(), only.end(), name.substr(7, name.size() - 10)))) names.push_back(name);
  }
  closedir(dir);
  if (names.empty()) throw std::runtime_error(folder + ": no mutant_*.so here" + (only.empty() ? "" : " of those --only names"));
  if (!only.empty() && names.size() != std::set<std::string>(only.begin(), only.end()).size())
    throw std::runtime_error(folder + ": not every mutant --only names is here (mutant_NAME.so)");
  std::sort(names.begin(), names.end());
  return names;
}

int mutants(const FlagValues& o) {
  const std::string& folder = o.text("dir");
  const std::vector<std::string> names = mutant_files(folder, o.all("only"));

  CampaignOptions options;
  options.seconds = o.number("seconds");
  options.max_cases = int64_t(o.number("cases"));
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

int mutants_command(const std::vector<std::string>& args) {
  return Flags("mutants")
      .text("dir", "DIR", "the folder of mutant_*.so, e.g. build/impl")
      .required()
      .number("seconds", "N", "each mutant's budget, and the built-in reference's: check's default", "60", 0.1, 1e9)
      .number("cases", "N",
              "also stop each campaign after N property runs, the reference's too: with a generous --seconds, the same "
              "matrix on any machine (0: no count)",
              "0", 0, 1e12)
      .number("shrink-seconds", "S", "each counterexample's shrinking budget (the matrix shows its shape); 0 for none", "10", 0,
              1e9)
      .number("seed", "S", "every campaign's seed", "1", 0, 1e9)
      .text("json", "FILE", "also write the kill matrix as JSON")
      .text("only", "NAME", "just the mutant NAME (mutant_NAME.so); given again, each of them")
      .repeatable()
      .run(args, mutants);
}

}  // namespace attncheck
