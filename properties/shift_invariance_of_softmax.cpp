// Claim: adding a constant to every permitted logit of a row leaves the softmax's weights
// unchanged, even where the logits pass fp32 exp's overflow at 88.7.
#include <cmath>

#include "attncheck/property.hpp"
#include "attncheck/rows.hpp"

namespace attncheck::properties {

// Softmax level: one query over Tk keys of width 1 with q = 1 and scale 1 makes the scores the
// logits themselves, and V = I makes the output the weights. Logits in eighths (some forbidden)
// and a shift that keeps them exact; the weights of x + a must be within the bound of softmax(x).
ATTNCHECK_PROPERTY(ShiftInvarianceOfSoftmax, .order = 60, .catches = "naive_softmax", .float32_cases = true,
                   .leaves = ATTNCHECK_ONLY_CAUSAL | ATTNCHECK_ONLY_SQUARE | ATTNCHECK_ONLY_DEFAULT_SCALE |
                             ATTNCHECK_ONLY_EQUAL_HEAD_DIMS | ATTNCHECK_ONLY_WITHIN_LIMITS) {
  const int64_t n = check.in_range(1, 25);
  const float shift = float(check.one_of({-1000, -100, -89, 89, 100, 1000}));
  Case<float> logits;
  logits.shape = {1, 1, 1, n, 1, 1};
  logits.q = {1};
  logits.scale = 1;
  check.follow_policies(logits);  // every logit may be masked
  logits.mix = "logits";
  for (int64_t j = 0; j < n; ++j) {
    logits.k.push_back(float(check.in_range(-600, 600)) / 8);
    const bool allowed = check.below(8) != 0;  // drawn either way: the same choices for every kernel
    if (check.claims(ATTNCHECK_CAP_ALLOW)) logits.allow.push_back(allowed);
  }
  logits = with_identity_values(logits);
  Case<float> shifted = logits;
  for (float& x : shifted.k) x += shift;
  Reference expected = reference(shifted.problem());
  const std::vector<uint8_t> rows = rows_computed(expected.out);
  expected.out.exact = reference(logits.problem(), &rows).out.exact;
  require_agreement(check, shifted, check.run(shifted), expected, "softmax of logits shifted by " + show(shift));
}

}  // namespace attncheck::properties
