// The campaign loop: properties run round after round within the budget, failed runs made findings.
#include "attncheck/campaign.hpp"

#include <algorithm>
#include <stdexcept>

#include "attncheck/abi.hpp"
#include "attncheck/causes.hpp"
#include "attncheck/features.hpp"
#include "campaign_parts.hpp"

namespace attncheck {

uint32_t checked_capabilities(uint32_t claimed, const CampaignOptions& options) {
  uint32_t checked = claimed & (all_capabilities() | kLayerOnly) & (options.formats | ~kFormatCapabilities) &
                     (options.backward ? ~0u : ~uint32_t(ATTNCHECK_CAP_BACKWARD));
  for (const Feature& f : features())  // a feature whose base is not claimed: no call can use it
    if (f.needs && !(claimed & f.needs)) checked &= ~f.capability;
  return checked;
}

Coverage coverage(uint32_t claimed, const CampaignOptions& options) {
  const uint32_t all = all_capabilities(), exercised = checked_capabilities(claimed, options);
  return {exercised & all, claimed & all & ~exercised, ~claimed & all};
}

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer: distinct seeds per (campaign seed, property, round)
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// What the kernel claims, and what of it the campaign checks: the properties that do not apply are
// set aside; a campaign that could check nothing is an error.
CampaignResult claims(const IsolatedKernel& kernel, const CampaignOptions& options) {
  CampaignResult result;
  result.abi_version = kernel.version();
  result.impl_said = kernel.said_at_start();
  result.capabilities = kernel.capabilities();
  result.domain = kernel.domain();
  const uint32_t checked = checked_capabilities(kernel.capabilities(), options);
  for (const Property& property : all_properties())
    if (std::string why = not_applicable(property, checked, options.policies, kernel.domain()); !why.empty())
      result.not_applicable[property.name] = why;
  if (options.require_backward && !(kernel.capabilities() & ATTNCHECK_CAP_BACKWARD))
    throw std::runtime_error(options.impl + ": claims no backward (ATTNCHECK_CAP_BACKWARD), and --backward on asks for it");
  if (!(checked & kFormatCapabilities))
    throw std::runtime_error(options.impl + ": claims none of the formats asked for (" +
                             feature_names(options.formats & kFormatCapabilities) + "), so nothing to check");
  return result;
}

// The time a run may still spend, of its budget: the search stops at options.seconds, and what a
// finding costs after it (shrinking, examining) may take it to kOvertime of it, never further.
constexpr double kOvertime = 1.08;

// A failed run becomes a finding: shrunk (in --shrink-seconds, or what is left of the run's budget),
// its failed call kept and examined. With keep_going, one an earlier finding explains (seen_before,
// before shrinking and after) is dropped; a run whose key (run_key) an earlier run had is examined
// again only the 2nd, 4th, 8th... time, and not once examining has taken a third of the budget, so
// that a bug in every call costs little.
void add_finding(IsolatedKernel& kernel, const CampaignOptions& options, const Property& property, const Run& run,
                 int64_t position, CampaignResult& result, std::map<std::string, int64_t>& repeats, CauseCache& causes,
                 Clock::time_point began) {
  const Clock::time_point start = Clock::now();
  Finding finding = run.finding;
  finding.run_kind = finding_kind(run.kind, run.worst_ratio, run.finding.message);
  auto examined = [&] {
    examine(kernel, options, property, finding, run.kind, causes);
    result.examine_seconds += since(start);
  };
  if (options.keep_going) {
    // Once examining has had a third of the budget, a key seen before is examined no more.
    const int64_t seen = ++repeats[run_key(run)];
    if (seen > 1 && ((seen & (seen - 1)) != 0 || result.examine_seconds > options.seconds / 3)) return;
    examined();
    if (seen_before(finding, result.findings)) return;
  }
  const Clock::time_point shrinking = Clock::now();
  const double left = options.seconds * kOvertime - since(began);
  finding = shrink(kernel, options, property, run.finding, run.kind, run.worst_ratio,
                   std::max(0.0, std::min(options.shrink_seconds, left)));
  result.shrink_seconds += since(shrinking);
  finding.run_kind = finding_kind(run.kind, run.worst_ratio, run.finding.message);
  finding.hung = run.kind == Outcome::hung;
  finding.found_at = position;
  const Clock::time_point again = Clock::now();
  examine(kernel, options, property, finding, run.kind, causes);  // the shrunk run's, which may show it plainer
  result.examine_seconds += since(again);
  if (options.keep_going && seen_before(finding, result.findings)) return;
  result.found = true;
  result.findings.push_back(std::move(finding));
  result.finding = result.findings.front();
}

// A run that ended with neither verdict, counted: a call not taken (and its reason), or the budget's end.
void count_unjudged(const Property& property, const Run& run, CampaignResult& result) {
  if (run.out_of_budget) {
    ++result.cut_runs;
    return;
  }
  ++result.not_taken_runs[property.name];
  ++result.not_taken_reasons[run.not_taken_reason.substr(0, run.not_taken_reason.find(": "))];  // its first clause
}

}  // namespace

CampaignResult run_campaign_share(const CampaignOptions& options, const CampaignShare& share) {
  // The budget bounds the whole run: starting the kernel, the search, and each finding's shrinking
  // and examining; no call runs past kOvertime of it (a call the end stops gives no verdict).
  const Clock::time_point began = Clock::now();
  IsolatedKernel kernel(options.impl, options.case_timeout, options.command);
  kernel.adapt_timeout(options.adaptive_timeout);
  kernel.set_budget_end(protocol::deadline_after(options.seconds * kOvertime));
  kernel.start();
  CampaignResult result = claims(kernel, options);
  result.start_seconds = since(began);
  const std::vector<Property>& properties = all_properties();
  // The runs are one sequence, fixed by the seed and the kernel's claims, each run's seed by its
  // property and round; this share runs its places in it (worker, worker + jobs, ...). The budget
  // decides only where it stops: at place options.max_cases (so that the union of the shares is
  // the same for any number of them), or at the first run that would start once the time is spent,
  // or whose property has taken longer than what is left (later, cheaper runs do not fill the gap,
  // so a longer budget always checks a superset and the count moves only with the speed), or past
  // another share's first finding.
  std::vector<double> longest(properties.size(), 0);
  std::map<std::string, int64_t> repeats;  // failed runs by run_key
  CauseCache causes;
  int64_t position = 0, running = 0;  // running: the place of the run under way
  // A run past another share's first finding is moot: its call is stopped, not waited for.
  if (share.first_finding) kernel.stop_when([&] { return share.first_finding->load() < running; });
  bool started = true, stop = false;
  auto finish = [&] {
    result.seconds = since(began) - result.start_seconds - result.shrink_seconds - result.examine_seconds;
    result.fp_mode = kernel.fp_mode_finding();
    return result;
  };
  // Every property runs in round 0 (the fixed ones only then, last by their order), so that a short
  // budget checks each once; a round after it that starts nothing means no later one will.
  for (uint64_t round = 0; !stop && (started || round <= 1); ++round) {
    started = false;
    for (size_t index = 0; index < properties.size() && !stop; ++index) {
      const Property& property = properties[index];
      if (!property.generated && round > 0) continue;
      if (result.not_applicable.count(property.name)) continue;
      const int64_t at = position++;
      stop = protocol::stop_requested() || (options.max_cases > 0 && at >= options.max_cases) ||
             since(began) >= options.seconds || longest[index] > options.seconds - since(began) ||
             (share.first_finding && at > share.first_finding->load());
      if (stop) break;
      started = true;
      if (at % share.jobs != share.worker) continue;
      running = at;
      const Clock::time_point run_start = Clock::now();
      // Round 0 draws small cases only; from round 1 on, the size ladder joins.
      const Run run = run_once(kernel, options, property, mix(options.seed ^ mix(index) ^ mix(round << 32)), nullptr, round > 0);
      const double took = since(run_start);
      longest[index] = std::max(longest[index], took);
      result.calls += run.calls;
      result.not_taken += run.calls_not_taken;
      if (!run.judged()) {
        count_unjudged(property, run, result);
        continue;
      }
      ++result.cases;
      ++result.per_property[property.name];
      result.per_property_seconds[property.name] += took;
      result.worst_ratio = std::max(result.worst_ratio, run.worst_ratio);
      if (options.progress) options.progress({result.cases, result.per_property.size(), since(began), run.failed});
      if (!run.failed) continue;
      if (!options.keep_going && share.first_finding)  // the other shares stop past it
        for (int64_t first = share.first_finding->load(); at < first && !share.first_finding->compare_exchange_weak(first, at);) {
        }
      add_finding(kernel, options, property, run, at, result, repeats, causes, began);
      if (result.found && !options.keep_going) return finish();
    }
  }
  return finish();
}

}  // namespace attncheck
