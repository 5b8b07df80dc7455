// Claim: each output coordinate is a convex combination of the permitted values: it lies in
// [min, max] of them (within the bound).

#include <algorithm>
#include <cmath>

#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(OutputsLieBetweenPermittedValues, .order = 90, .catches = "online_no_rescale") {
  const Case<float> c = check.draw<float>();
  const std::vector<float> out = check.run(c);
  const Reference ref = reference(c.problem());
  const Shape& s = c.shape;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        if (!ref.out.row_is_exact(s.lse_at(b, h, i))) continue;                  // a large case's unsampled row
        const std::vector<int64_t> keys = exact_row(c.problem(), b, h, i).keys;  // those that carry weight
        for (int64_t col = 0; col < s.dv; ++col) {
          const size_t n = size_t(s.out_at(b, h, i) + col);
          if (keys.empty() || !std::isfinite(ref.out.bound[n]) || !std::isfinite(ref.out.exact[n])) continue;
          float lo = INFINITY, hi = -INFINITY;
          for (int64_t j : keys) {
            lo = std::min(lo, c.v[size_t(s.v_at(b, h, j) + col)]);
            hi = std::max(hi, c.v[size_t(s.v_at(b, h, j) + col)]);
          }
          ATTNCHECK_REQUIRE(check, out[n] >= lo - ref.out.bound[n] && out[n] <= hi + ref.out.bound[n],
                            "out[" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) + "," +
                                std::to_string(col) + "] = " + show(out[n]) + " lies outside [" + show(lo) + ", " + show(hi) +
                                "]\n" + describe_failure(c, b, h, i));
        }
      }
}

}  // namespace attncheck::properties
