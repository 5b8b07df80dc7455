// Claim: adding a constant to every permitted score of a row leaves attention's output unchanged,
// and moves its log-sum-exp by that constant, even where the scores pass fp32 exp's overflow at 88.7.
#include "attncheck/property.hpp"
#include "attncheck/rows.hpp"

namespace attncheck::properties {

// Attention: appending a / scale to every q and 1 to every k adds a to every score of every row,
// so the exact output is that of the same case with 0 appended (the original's, but under a default
// scale only, which the wider q changes: with_scores_shifted); the kernel's output on the shifted problem must be
// within that problem's bound of it, and its log-sum-exp must move by a (the oracle's of the
// shifted problem). Shifts reach fp32 exp overflow and common mask sentinels; in f16 and bf16 the
// appended value is rounded to the format (the shift is then scale times that: still one constant),
// and a shift the format cannot hold is taken ten times smaller.
ATTNCHECK_PROPERTY(ShiftInvarianceOfAttention, .order = 80, .catches = "naive_softmax", .widens_heads = true) {
  Case<float> c = check.draw<float>();
  c.softcap = 0;  // a soft-cap bends the scores: cap tanh((s + a) / cap) is no shift of cap tanh(s / cap)
  const std::optional<ShiftedCase> shift =
      with_scores_shifted(check, c, check.one_of({-1e4, -1000.0, -100.0, -88.8, 88.8, 100.0, 1000.0, 1e4}));
  check.classify(!shift, "no wider head in the domain");
  if (!shift) return;
  const Case<float>& shifted = shift->c;
  Reference expected = reference(shifted.problem());
  const std::vector<uint8_t> rows = rows_computed(expected.out);  // a large case: the same sample
  expected.out.exact = reference(shift->unshifted.problem(), &rows).out.exact;
  std::vector<float> lse;
  const std::vector<float> out = check.run_with_lse(shifted, lse);
  require_agreement(check, shifted, out, expected, "shifting every logit by " + show(shift->applied), lse_if_any(lse));
}

}  // namespace attncheck::properties
