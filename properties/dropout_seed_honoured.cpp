// Claim: the dropout seed is the kernel's stream: one seed gives the same output bit for bit, and
// another seed another mask, agreeing with the first on at most a fraction p^2 + (1 - p)^2 + 2/256
// (dropout_masks_differ_across_heads.cpp) plus Hoeffding's margin of its 16384 weights (0.027; a
// false alarm has probability below 1e-10).

#include <cstring>

#include "attncheck/dropout_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(DropoutSeedHonoured, .order = 230, .catches = "dropout_seed_ignored", .float32_cases = true,
                   .needs = ATTNCHECK_CAP_DROPOUT, .leaves = ATTNCHECK_ONLY_CAUSAL | ATTNCHECK_ONLY_WITHIN_LIMITS) {
  const double p = draw_dropout_rate(check);
  const uint64_t seed = check.below(uint64_t(1) << 32), other = seed + 1 + check.below(1000);
  const Case<float> c = uniform_dropout_case(p, seed);
  const std::vector<float> first = check.run(c), again = check.run(c);
  ATTNCHECK_REQUIRE(
      check, std::memcmp(first.data(), again.data(), first.size() * sizeof(float)) == 0,
      "dropout at p = " + show(p) + ": two calls with seed " + std::to_string(seed) + " gave different outputs\n" + describe(c));
  const std::vector<uint8_t> a = uniform_keep_mask(check, p, seed), b = uniform_keep_mask(check, p, other);
  const int64_t n = int64_t(a.size());
  const double expected = p * p + (1 - p) * (1 - p), limit = expected + 2 * kRateQuantum + hoeffding_margin(n),
               same = agreement(a, b, 0, 0, n);
  ATTNCHECK_REQUIRE(check, same <= limit,
                    "dropout at p = " + show(p) + ": seeds " + std::to_string(seed) + " and " + std::to_string(other) +
                        " drop the same weights on " + show(same) + " of " + std::to_string(n) + "; independent masks agree on " +
                        show(expected) + " (at most " + show(limit) + ", false alarm below 1e-10)\n" + describe(c));
}

}  // namespace attncheck::properties
