// Claim: without the 1/sqrt(d) scale the softmax saturates as d grows: the largest weight tends
// to 1 and the trace of its Jacobian, 1 - sum p^2, to 0 (vanishing gradients); with the scale
// both stay put. N = 1024 independent queries (one per head) over 128 Gaussian keys each; every
// check compares a mean of N values in [0, 1] with a threshold at least 0.13 from its expected
// value (about 0.23 / 0.89 largest weight unscaled at d 4 / 256, 0.07 scaled; 1 - sum p^2 0.88 /
// 0.16 unscaled, above 0.95 scaled), so by Hoeffding a false alarm has probability below
// exp(-2 N 0.13^2) = 1e-15 per check. Fixed seeds: the outcome is the same on every run.
#include <gtest/gtest.h>

#include <algorithm>

#include "attncheck/property_support.hpp"
#include "attncheck/weights_probe.hpp"

namespace attncheck {
namespace {

constexpr int64_t kQueries = 1024, kKeys = 128;

struct Saturation {
  double largest_weight = 0, jacobian_trace = 0;  // means over the queries
};

// The weights of N Gaussian queries over 128 Gaussian keys in dimension d, scaled or not, read
// through V = I.
Saturation measure(int64_t d, bool scaled) {
  SeededChooser choose(7000 + uint64_t(d));
  Case<float> c;
  c.shape = {1, kQueries, 1, kKeys, d, 1};
  c.scale = scaled ? 0 : 1;
  c.mix = "saturation";
  for (int64_t n = 0; n < kQueries * d; ++n) c.q.push_back(float(standard_normal(choose)));
  for (int64_t n = 0; n < kQueries * kKeys * d; ++n) c.k.push_back(float(standard_normal(choose)));
  c = with_identity_values(c);
  const std::vector<float> w = run_kernel(c);
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

TEST(Property, UnscaledSoftmaxSaturatesAsDGrows) {
  const Saturation d4 = measure(4, false), d256 = measure(256, false);
  EXPECT_LT(d4.largest_weight, 0.45);
  EXPECT_GT(d4.jacobian_trace, 0.7);
  EXPECT_GT(d256.largest_weight, 0.7) << "unscaled, d 256: the largest weight should approach 1";
  EXPECT_LT(d256.jacobian_trace, 0.35) << "unscaled, d 256: 1 - sum p^2 should approach 0";
}

TEST(Property, ScaledSoftmaxStaysPutAsDGrows) {
  for (int64_t d : {4, 16, 64, 256}) {
    const Saturation s = measure(d, true);
    EXPECT_LT(s.largest_weight, 0.2) << "scaled, d " << d;
    EXPECT_GT(s.jacobian_trace, 0.8) << "scaled, d " << d;
  }
}

}  // namespace
}  // namespace attncheck
