// Examining a finding: its failed call kept, what it shows and the known bug class it matches.
#include <algorithm>

#include "attncheck/causes.hpp"
#include "attncheck/diagnosis.hpp"
#include "campaign_parts.hpp"

namespace attncheck {
namespace {

// The case of the kernel call `finding` is about (Finding::failed_call): its run once more, every
// call kept.
void keep_failed_call(IsolatedKernel& kernel, const CampaignOptions& options, const Property& property, Finding& finding) {
  std::vector<KernelCall> calls;
  run_once(kernel, options, property, 0, nullptr, false, ~0u, &finding, false, &calls);
  if (calls.empty()) return;
  const WrongCall wrong = first_wrong_call(calls);
  const KernelCall& call = calls[std::min(wrong.index, calls.size() - 1)];
  finding.failed_call = call.case_text;
  finding.failed_call_why = wrong.index < calls.size() ? wrong.why : "";  // a relation between calls broke: no call is wrong
  finding.failed_call_lse = !call.lse.empty();
}

}  // namespace

// Its failed call kept (keep_failed_call), what it shows (diagnose) and the known bug class it
// matches (cause_of), and its kind from them.
void examine(IsolatedKernel& kernel, const CampaignOptions& options, const Property& property, Finding& f, int fault,
             CauseCache& causes) {
  if (fault != Outcome::hung) keep_failed_call(kernel, options, property, f);
  diagnose(kernel, options, f);
  if (f.diagnosis.wrong) f.ratio = std::max(f.ratio, f.diagnosis.element.ratio);  // a relation's failed call: how wrong it is
  f.kind = finding_kind(fault, f.ratio, f.message, f.diagnosis);
  f.diagnosis.cause = cause_of(kernel, f, causes);
}

}  // namespace attncheck
