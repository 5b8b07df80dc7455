// What a finding's failed call shows, tried as a newcomer would: the element the oracle calls wrong,
// the features it fails only with (the call again without each: "fails only with: grouped KV
// heads"), whether an input no query may see changed it, and which other policy would accept it.
// The campaign also tells findings apart by it (Diagnosis::signature): one bug, many properties.
#pragma once

#include <string>
#include <vector>

#include "attncheck/campaign.hpp"
#include "attncheck/case_text.hpp"
#include "attncheck/compare.hpp"
#include "attncheck/isolated_kernel.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck {

// The oracle's verdict on one call's results by the rigorous bound: out [B,H,Tq,dv], then lse
// [B,H,Tq] when given (not empty). A call with dropout has none here: the oracle needs the mask the
// kernel drew, and its property judged it (for the mask returned or read off the output, or by
// the masks' statistics), so no single dropout call is named the failed one.
template <class T>
Comparison judged(const Case<T>& c, const std::vector<T>& out, const std::vector<T>& lse) {
  if (c.dropout_p > 0) return {};
  const Reference ref = reference(c.problem());
  Comparison compared = compare(out.data(), ref.out);
  if (compared.ok() && !lse.empty()) compared = compare(lse.data(), ref.lse);
  return compared;
}

// Fills finding.diagnosis from its failed call (nothing for a hang, or for a relation between calls
// that broke while each call was right), running the kernel on the call's variants.
void diagnose(IsolatedKernel& kernel, const CampaignOptions& options, Finding& finding);

// The lines a finding's report adds: "fails only with: ...", "accepted under: ..." (empty for none).
std::string diagnosis_text(const Diagnosis& d);

}  // namespace attncheck
