// Claim: with the 1/sqrt(d) scale the softmax does not saturate as d grows: the largest weight and
// the trace of its Jacobian, 1 - sum p^2, stay put. The probe's N = 1024 queries
// (saturation_support.hpp) give means of N values in [0, 1], each compared with a threshold at least
// 0.13 from its expected value (largest weight 0.16 to 0.165, 1 - sum p^2 0.925 to 0.928 at d 4 to
// 256: means of 2x10^4 draws, properties/tests/saturation_means.py), so by Hoeffding a false alarm
// has probability below exp(-2 N 0.13^2) = 1e-15 per check.
#include "attncheck/saturation_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(ScaledSoftmaxStaysPutAsDGrows, .order = 200, .catches = "no_scale", .generated = false, .float32_cases = true,
                   .leaves = kSaturationLeaves) {
  for (int64_t d : {4, 16, 64, 256}) {
    const Saturation s = measure(check, d, true);
    ATTNCHECK_REQUIRE(check, s.largest_weight < 0.3 && s.jacobian_trace > 0.79,
                      "scaled, d " + std::to_string(d) + ": largest weight " + show(s.largest_weight) + ", 1 - sum p^2 " +
                          show(s.jacobian_trace) + ": saturating as if unscaled");
  }
}

}  // namespace attncheck::properties
