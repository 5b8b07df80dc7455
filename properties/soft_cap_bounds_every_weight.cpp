// Claim: with a soft-cap c every score lies in [-c, c], so no weight of a row of n keys can pass
// e^(2c) / (e^(2c) + n - 1), however large d grows: the unscaled d 256 probe, whose largest weight
// is about 0.91 uncapped, stays below that with caps 1 and 2 (0.19 and 0.64), every row of it,
// within the oracle's bound. A bound, not a statistic: no false alarm at all.
#include <cmath>

#include "attncheck/saturation_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(SoftCapBoundsEveryWeight, .order = 195, .catches = "softcap_ignored", .generated = false,
                   .float32_cases = true, .needs = ATTNCHECK_CAP_SOFTCAP,
                   .leaves = kSaturationLeaves | ATTNCHECK_ONLY_DEFAULT_SCALE) {
  for (double cap : {1.0, 2.0}) {
    Case<float> c = probe(256, false);
    c.softcap = cap;
    const std::vector<float> w = check.run(c);
    const Reference ref = reference(c.problem());
    const double limit = std::exp(2 * cap) / (std::exp(2 * cap) + double(kKeys - 1));
    for (size_t n = 0; n < w.size(); ++n)
      ATTNCHECK_REQUIRE(check, double(w[n]) <= limit + ref.out.bound[n],
                        "soft-cap " + show(cap) + ", unscaled, d 256: weight " + show(w[n]) + " of query " +
                            std::to_string(n / size_t(kKeys)) + " passes e^(2 cap) / (e^(2 cap) + 31) = " + show(limit) +
                            ": is the soft-cap ignored?");
  }
}

}  // namespace attncheck::properties
