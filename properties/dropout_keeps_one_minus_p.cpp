// Claim: dropout keeps a fraction 1 - p of the weights: of n = 16384, the kept count is
// Binomial(n, q) with q within 1/256 of 1 - p (a rate drawn in 8 bits), and its fraction lies within
// Hoeffding's margin (0.027) of q: a false alarm has probability below 1e-10. p is never 0.5 here,
// where p and 1 - p are the same.

#include "attncheck/dropout_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(DropoutKeepsOneMinusP, .order = 220, .catches = "dropout_p_swapped", .float32_cases = true,
                   .needs = ATTNCHECK_CAP_DROPOUT, .leaves = ATTNCHECK_ONLY_CAUSAL | ATTNCHECK_ONLY_WITHIN_LIMITS) {
  const double p = draw_dropout_rate(check, true);
  const uint64_t seed = check.below(uint64_t(1) << 32);
  const std::vector<uint8_t> keep = uniform_keep_mask(check, p, seed);
  const int64_t n = int64_t(keep.size());
  double kept = 0;
  for (uint8_t k : keep) kept += k;
  kept /= double(n);
  const double margin = hoeffding_margin(n) + kRateQuantum;
  ATTNCHECK_REQUIRE(check, std::fabs(kept - (1 - p)) <= margin,
                    "dropout at p = " + show(p) + " kept " + show(kept) + " of " + std::to_string(n) +
                        " weights, not 1 - p = " + show(1 - p) + " within " + show(margin) +
                        " (Binomial(n, 1 - p); false alarm below 1e-10)\n" + describe(uniform_dropout_case(p, seed)));
}

}  // namespace attncheck::properties
