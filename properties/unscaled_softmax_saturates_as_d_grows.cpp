// Claim: without the 1/sqrt(d) scale the softmax saturates as d grows: the largest weight tends
// to 1 and the trace of its Jacobian, 1 - sum p^2, to 0 (vanishing gradients). The probe's N = 1024
// queries (saturation_support.hpp) give means of N values in [0, 1], each compared with a threshold
// at least 0.13 from its expected value (largest weight about 0.34 / 0.91 at d 4 / 256, 1 - sum p^2
// 0.79 / 0.13: means of 2x10^4 draws, properties/tests/saturation_means.py), so by Hoeffding a false
// alarm has probability below exp(-2 N 0.13^2) = 1e-15 per check.
#include "attncheck/saturation_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(UnscaledSoftmaxSaturatesAsDGrows, .order = 190, .catches = "explicit_scale_ignored", .generated = false,
                   .float32_cases = true, .leaves = kSaturationLeaves | ATTNCHECK_ONLY_DEFAULT_SCALE) {
  const Saturation d4 = measure(check, 4, false), d256 = measure(check, 256, false);
  ATTNCHECK_REQUIRE(check, d4.largest_weight < 0.5 && d4.jacobian_trace > 0.65,
                    "unscaled, d 4: largest weight " + show(d4.largest_weight) + ", 1 - sum p^2 " + show(d4.jacobian_trace));
  ATTNCHECK_REQUIRE(check, d256.largest_weight > 0.75 && d256.jacobian_trace < 0.28,
                    "unscaled, d 256: largest weight " + show(d256.largest_weight) + " (should approach 1), 1 - sum p^2 " +
                        show(d256.jacobian_trace) + " (should approach 0): is an explicit scale of 1 ignored?");
}

}  // namespace attncheck::properties
