// Claim: the scale read off the output of two keys is 1/sqrt(dk): with q = e_1, k_1 = e_1, k_2 = 0
// and v = I, log(out_1 / out_2) is the scale itself, exactly.
#include <cmath>

#include "attncheck/property.hpp"

namespace attncheck::properties {

// Black-box: q = e_1, k_1 = e_1, k_2 = 0, v = I gives log(out_1 / out_2) = c exactly, 1/sqrt(dk) =
// 0.5 at dk 4 (0.354 if scaled by the model width, H 2 heads of 4; 0.25 if by 1/dk): the smallest
// case that tells the three apart. Float rounding moves it by at most about 3e-7 (the bound of each
// output, about 10u, over outputs near 0.5); 1e-5 leaves room for any correct kernel.
// Last of round 0 but one, as ANanOrInfPermittedScoreMakesItsRowNaN: drawn cases, which shrink, first.
// In the kernel's domain: read off the last query (with_last_query), v as wide as q under dk = dv.
ATTNCHECK_PROPERTY(ScaleReadOffTwoKeys, .order = 177, .catches = "model_width_scale", .generated = false, .float32_cases = true,
                   .leaves = ATTNCHECK_ONLY_WITHIN_LIMITS) {
  constexpr int64_t kHeads = 2, kWidth = 4;
  Case<float> c;
  c.shape = {1, kHeads, 1, 2, kWidth, 2};
  c.mix = "two keys";
  for (int64_t h = 0; h < kHeads; ++h) {
    std::vector<float> e1(kWidth, 0.0f);
    e1[0] = 1;
    c.q.insert(c.q.end(), e1.begin(), e1.end());
    c.k.insert(c.k.end(), e1.begin(), e1.end());
    c.k.insert(c.k.end(), kWidth, 0.0f);
    c.v.insert(c.v.end(), {1, 0, 0, 1});
  }
  if (check.domain().only(ATTNCHECK_ONLY_EQUAL_HEAD_DIMS)) c = with_value_width(c, kWidth);
  c = with_last_query(check, c);
  const std::vector<float> out = check.run(c);
  for (int64_t h = 0; h < kHeads; ++h) {
    const size_t row = size_t(c.shape.out_at(0, h, last_query(c)));
    const double read = std::log(double(out[row]) / out[row + 1]);
    ATTNCHECK_REQUIRE(check, std::fabs(read - 0.5) <= 1e-5,
                      "head " + std::to_string(h) + ": log(out_1/out_2) = " + show(read) +
                          ", not the scale 1/sqrt(dk) = 1/sqrt(4) = 0.5 (0.354 would be 1/sqrt(H dk), 0.25 1/dk)\n" +
                          describe(c));
  }
}

}  // namespace attncheck::properties
