#include "attncheck/saturation_support.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace attncheck::properties {
namespace {

// Standard normal values in pairs by Marsaglia's polar method on std::mt19937_64 (specified by the
// standard, so the same everywhere): no trigonometry, about three times faster than the case
// generator's Box-Muller, which matters for the 20 to 37 million values these probes draw.
class Normals {
 public:
  explicit Normals(uint64_t seed) : rng_(seed) {}
  float next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double x, y, r;
    do {
      x = 2 * double(rng_() >> 11) * 0x1p-53 - 1;
      y = 2 * double(rng_() >> 11) * 0x1p-53 - 1;
      r = x * x + y * y;
    } while (r >= 1 || r == 0);
    const double factor = std::sqrt(-2 * std::log(r) / r);
    spare_ = float(y * factor);
    has_spare_ = true;
    return float(x * factor);
  }

 private:
  std::mt19937_64 rng_;
  float spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace

Case<float> probe(int64_t d, bool scaled) {
  Normals normal(7000 + uint64_t(d));
  Case<float> c;
  c.shape = {1, kQueries, 1, kKeys, d, 1};
  c.scale = scaled ? 0 : 1;
  c.mix = "saturation";
  c.q.resize(size_t(kQueries * d));
  c.k.resize(size_t(kQueries * kKeys * d));
  for (float& x : c.q) x = normal.next();
  for (float& x : c.k) x = normal.next();
  return with_identity_values(c);
}

Saturation measure(Checker& check, int64_t d, bool scaled) {
  const std::vector<float> w = check.run(probe(d, scaled));
  Saturation result;
  for (int64_t h = 0; h < kQueries; ++h) {
    const auto row = w.begin() + h * kKeys;
    double sum_squares = 0;
    for (int64_t j = 0; j < kKeys; ++j) sum_squares += double(row[j]) * row[j];
    result.largest_weight += *std::max_element(row, row + kKeys) / double(kQueries);
    result.jacobian_trace += (1 - sum_squares) / double(kQueries);
  }
  return result;
}

}  // namespace attncheck::properties
