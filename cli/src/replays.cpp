// Replays: a recorded finding run again, and replay files written and read.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "attncheck/abi.hpp"
#include "attncheck/case_text.hpp"
#include "attncheck/causes.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/plugin_loader.hpp"
#include "attncheck/printable.hpp"
#include "attncheck/replay_file.hpp"
#include "campaign_parts.hpp"

namespace attncheck {
namespace {

const Property& property_named(const std::string& name) {
  for (const Property& p : all_properties())
    if (name == p.name) return p;
  throw std::runtime_error("no property named '" + printable(name, 80) + "'");
}

}  // namespace

CampaignResult replay(const CampaignOptions& options, const Finding& recorded, std::vector<KernelCall>* calls) {
  IsolatedKernel kernel(options.impl, options.case_timeout, options.command);
  kernel.adapt_timeout(options.adaptive_timeout);
  kernel.start();
  if (property_named(recorded.property).double_precision && !kernel.has_f64())
    throw std::runtime_error(options.impl + ": no attncheck_forward_f64, so Property." + recorded.property +
                             " cannot be replayed on it");
  CampaignOptions both = options;  // the recorded case decides the format, not --dtype
  both.formats = ~0u;
  const Clock::time_point start = Clock::now();
  const Property& property = property_named(recorded.property);
  // The recorded case runs up to kReplayRuns times while it passes: a kernel whose answers vary
  // between identical calls may pass once; each run's calls are kept to show that they vary.
  constexpr int kReplayRuns = 3;
  std::vector<std::vector<KernelCall>> runs;
  Run run;
  for (int n = 0; n < kReplayRuns && !run.failed; ++n) {
    runs.emplace_back();
    run = recorded.kept ? run_once(kernel, both, property, 0, nullptr, false, ~0u, &recorded, true, &runs.back())
                        : run_once(kernel, both, property, 0, &recorded.choices, recorded.ladder, recorded.capabilities, nullptr,
                                   true, &runs.back());
  }
  if (calls) *calls = runs.back();
  CampaignResult result;
  result.abi_version = kernel.version();
  result.impl_said = kernel.said_at_start();
  result.capabilities = kernel.capabilities();
  result.domain = kernel.domain();
  result.replayed = true;
  result.cases = int64_t(runs.size());
  result.calls = run.calls;
  result.not_taken = run.calls_not_taken;
  result.per_property[recorded.property] = result.cases;
  result.found = run.failed;
  result.finding = run.finding;
  const std::string varies = answers_vary(runs);
  if (run.failed) {
    CauseCache causes;
    examine(kernel, both, property, result.finding, run.kind, causes);
    if (runs.size() > 1) {  // it passed before it failed
      result.finding.kind = "answers vary";
      result.finding.message = varies + "; the recorded case passed " + std::to_string(runs.size() - 1) + " of " +
                               std::to_string(runs.size()) + " runs\n" + result.finding.message;
    }
  } else if (!varies.empty()) {  // it passes every run, but identical calls answered differently: not "no longer fails"
    result.found = true;
    result.finding = recorded;
    result.finding.kind = "answers vary";
    result.finding.message = varies + " over " + std::to_string(runs.size()) + " runs of the recorded case";
  }
  if (result.found) result.findings = {result.finding};
  result.worst_ratio = run.worst_ratio;
  result.seconds = since(start);
  result.fp_mode = kernel.fp_mode_finding();
  return result;
}

std::string answers_vary(const std::vector<std::vector<KernelCall>>& runs) {
  double largest = 0;
  std::string where;
  for (size_t r = 1; r < runs.size(); ++r)
    for (size_t n = 0; n < std::min(runs[0].size(), runs[r].size()); ++n) {
      const KernelCall &first = runs[0][n], &again = runs[r][n];
      if (first.case_text != again.case_text || first.out.size() != again.out.size()) continue;
      for (size_t e = 0; e < first.out.size(); ++e) {
        if (unchanged(first.out[e], again.out[e])) continue;
        const double difference =
            std::isnan(first.out[e]) || std::isnan(again.out[e]) ? INFINITY : std::fabs(first.out[e] - again.out[e]);
        if (!where.empty() && !(difference > largest)) continue;
        largest = difference;
        where = "call " + std::to_string(n + 1) + "'s out element " + std::to_string(e) + " was " + show(first.out[e]) +
                ", then " + show(again.out[e]);
      }
    }
  return where.empty() ? ""
                       : "answers vary between identical calls: " + where + " (the largest difference, " + show(largest) + ")";
}

WrongCall first_wrong_call(const std::vector<KernelCall>& calls) {
  for (size_t n = 0; n < calls.size(); ++n) {
    const KernelCall& call = calls[n];
    if (!call.fault.empty()) return {n, "the kernel " + call.fault};
    const Comparison result = visit_case_text(call.case_text, [&](const auto& c) {
      using T = typename std::decay_t<decltype(c.q)>::value_type;
      return judged(c, std::vector<T>(call.out.begin(), call.out.end()), std::vector<T>(call.lse.begin(), call.lse.end()));
    });
    if (result.ok()) continue;
    const Mismatch& m = result.special ? result.first_special : result.worst;
    return {n, m.where() + (result.special ? ": " + m.expected_got() : " outside the bound (error/bound " + show(m.ratio) + ")")};
  }
  return {calls.size(), ""};
}

void write_replay(const std::string& path, const CampaignOptions& options, const Finding& finding, const Domain& domain) {
  ReplayFile r;
  r.domain = domain;
  r.property = finding.property;
  r.impl = options.impl;
  r.command = options.command;
  r.policies = options.policies;
  r.case_text = finding.case_text;
  r.choices = finding.kept_choices;
  r.failed_call = finding.failed_call;
  r.failed_call_why = finding.failed_call_why;
  r.failed_call_lse = finding.failed_call_lse;
  write_replay_file(path, r);
}

Finding read_replay(const std::string& path, CampaignOptions& options, bool keep_impl) {
  const ReplayFile r = read_replay_file(path);
  property_named(r.property);  // a clear error for an unknown property
  if (!keep_impl) options.impl = r.impl, options.command = r.command;
  options.policies = r.policies;
  Finding finding;
  finding.property = r.property;
  finding.kept = r.format == 2;  // 1: the generator's choices; 2: the case itself
  // Format 1 predates ABI v2: its choices were drawn with what v1 carries.
  if (!finding.kept) finding.capabilities = kAbiV1Capabilities | ATTNCHECK_CAP_F64;
  finding.case_text = r.case_text;
  (finding.kept ? finding.kept_choices : finding.choices) = r.choices;
  finding.failed_call = r.failed_call;
  finding.failed_call_why = r.failed_call_why;
  finding.failed_call_lse = r.failed_call_lse;
  return finding;
}

}  // namespace attncheck
