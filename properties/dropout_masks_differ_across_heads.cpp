// Claim: every batch and head draws its own dropout mask: two independent masks keeping with
// probability q agree on a weight with probability q^2 + (1 - q)^2, at most a = p^2 + (1 - p)^2 +
// 2/256 for q within 1/256 of 1 - p (a rate drawn in 8 bits), so over Tq Tk = 4096 weights head 0
// and head 1 (and batch 0 and batch 1) agree on at most a fraction a plus Hoeffding's margin
// (0.054): each pair's false alarm has probability below 1e-10. A shared mask agrees everywhere.

#include "attncheck/dropout_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(DropoutMasksDifferAcrossHeads, .order = 225, .catches = "dropout_mask_shared_across_heads",
                   .float32_cases = true, .needs = ATTNCHECK_CAP_DROPOUT,
                   .leaves = ATTNCHECK_ONLY_CAUSAL | ATTNCHECK_ONLY_WITHIN_LIMITS) {
  const double p = draw_dropout_rate(check);
  const uint64_t seed = check.below(uint64_t(1) << 32);
  const std::vector<uint8_t> keep = uniform_keep_mask(check, p, seed);
  const Shape s = uniform_dropout_case(p, seed).shape;
  const int64_t n = s.Tq * s.Tk;
  const double expected = p * p + (1 - p) * (1 - p), limit = expected + 2 * kRateQuantum + hoeffding_margin(n);
  const std::pair<const char*, int64_t> others[] = {{"head 1 of batch 0", s.scores_at(0, 1, 0)},
                                                    {"head 0 of batch 1", s.scores_at(1, 0, 0)}};
  for (const auto& [name, at] : others) {
    const double same = agreement(keep, keep, s.scores_at(0, 0, 0), at, n);
    ATTNCHECK_REQUIRE(check, same <= limit,
                      std::string("dropout at p = ") + show(p) + ": the masks of head 0 of batch 0 and " + name + " agree on " +
                          show(same) + " of " + std::to_string(n) + " weights; independent masks agree on " + show(expected) +
                          " (at most " + show(limit) + ", false alarm below 1e-10)\n" + describe(uniform_dropout_case(p, seed)));
  }
}

}  // namespace attncheck::properties
