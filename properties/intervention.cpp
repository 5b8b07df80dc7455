// Claim: changing the keys and values a query may not see, even to inf, NaN or 1e30, leaves that
// query's output bit-identical: a forbidden key is never read into a valid output. A kernel that
// multiplies padded values by a zero weight fails here (0 * NaN is NaN).

#include <cstring>
#include <limits>

#include "attncheck/property.hpp"

namespace attncheck::properties {

void ForbiddenKeysAndValuesCannotChangeValidOutputs(Checker& check) {
  const Case<float> c = check.draw<float>();
  const Shape& s = c.shape;
  const int64_t b = check.in_range(0, s.B), i = check.in_range(0, s.Tq);
  const float poisons[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), 1e30f, -1e30f};
  Case<float> poisoned = c;
  int64_t forbidden = 0;
  for (int64_t j = 0; j < s.Tk; ++j) {
    if (mask_permits(c, b, i, j)) continue;
    ++forbidden;
    const float poison = poisons[check.in_range(0, std::size(poisons))];
    for (int64_t h = 0; h < s.H; ++h) {
      std::fill_n(poisoned.k.begin() + ((b * s.H + h) * s.Tk + j) * s.dk, s.dk, poison);
      std::fill_n(poisoned.v.begin() + ((b * s.H + h) * s.Tk + j) * s.dv, s.dv, poison);
    }
  }
  check.classify(forbidden > 0, "query has forbidden keys");
  const std::vector<float> clean = check.run(c), dirty = check.run(poisoned);
  for (int64_t h = 0; h < s.H; ++h) {
    const size_t row = size_t(((b * s.H + h) * s.Tq + i) * s.dv);
    ATTNCHECK_REQUIRE(check, std::memcmp(&clean[row], &dirty[row], size_t(s.dv) * sizeof(float)) == 0,
                  "row [" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) +
                      "] changed when only keys it may not see were poisoned: " + show(clean[row]) +
                      " became " + show(dirty[row]) + "\n" + describe(poisoned));
  }
}

}  // namespace attncheck::properties
