// The oracle's double-double arithmetic against MPFR at 256 bits: every operation within the error
// double_double.hpp charges to the bound, on random and edge arguments (fixed seeds).
#include <gtest/gtest.h>

#include <mpfr.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "../src/double_double.hpp"

namespace attncheck::dd {
namespace {

// A 256-bit MPFR value, freed on scope exit.
struct Big {
  mpfr_t x;
  Big() { mpfr_init2(x, 256); }
  explicit Big(DD d) : Big() {
    mpfr_set_d(x, d.hi, MPFR_RNDN);
    mpfr_add_d(x, x, d.lo, MPFR_RNDN);
  }
  ~Big() { mpfr_clear(x); }
};

// |computed - exact| / |exact|, as a double.
double relative_error(DD computed, const Big& exact) {
  Big difference(computed);
  mpfr_sub(difference.x, difference.x, exact.x, MPFR_RNDN);
  mpfr_div(difference.x, difference.x, exact.x, MPFR_RNDN);
  return std::fabs(mpfr_get_d(difference.x, MPFR_RNDN));
}

// A normalized double-double near `hi`, its lo anywhere within half an ulp.
DD near(double hi, std::mt19937_64& rng) {
  const double ulp = std::nextafter(std::fabs(hi), INFINITY) - std::fabs(hi);
  const double lo = (double(rng() >> 11) * 0x1p-53 - 0.5) * ulp * 0.999;
  return fast_two_sum(hi, lo);
}

double uniform(std::mt19937_64& rng, double lo, double hi) { return lo + (hi - lo) * double(rng() >> 11) * 0x1p-53; }

TEST(DoubleDouble, ExpStaysWithinItsChargedError) {
  std::mt19937_64 rng(20261130);
  double worst = 0, worst_at = 0;
  for (int n = 0; n < 300000; ++n) {
    // Uniform over the range, near 0, near the reduction's edges (k ln2/128), and near underflow.
    const int kind = n % 4;
    const double hi = kind == 0   ? uniform(rng, -745, 0)
                      : kind == 1 ? -std::ldexp(uniform(rng, 0.5, 1), -int(rng() % 60))
                      : kind == 2 ? -(double(rng() % 200000) + 0.5) * 0.6931471805599453 / 64 + uniform(rng, -1e-12, 1e-12)
                                  : uniform(rng, -745.1, -700);
    const DD x = near(std::min(hi, -0.0), rng), computed = exp(x);
    Big exact(x);
    mpfr_exp(exact.x, exact.x, MPFR_RNDN);
    const double allowed = kExpError + 0x1p-1074 / computed.hi;
    const double error = relative_error(computed, exact);
    ASSERT_LE(error, allowed) << "exp(" << x.hi << " + " << x.lo << ")";
    if (computed.hi > 0x1p-960 && error > worst) {
      worst = error;
      worst_at = x.hi;
    }
  }
  std::printf("largest relative error of exp on normal results: %.2f u^2 (charged %.0f u^2), at x = %.17g\n", worst / kU2,
              kExpError / kU2, worst_at);
}

TEST(DoubleDouble, ExpEdges) {
  EXPECT_EQ(exp(DD{0, 0}).hi, 1.0);
  EXPECT_EQ(exp(DD{0, 0}).lo, 0.0);
  EXPECT_EQ(exp(DD{-745.3, 0}).hi, 0.0);  // below 2^-1075
  EXPECT_EQ(exp(DD{-INFINITY, 0}).hi, 0.0);
  EXPECT_GT(exp(DD{-745.1, 0}).hi, 0.0);  // subnormal, not dropped
  // The batch form gives each value exactly what the single form does.
  DD x[11], batch[11];
  for (int t = 0; t < 11; ++t) x[t] = {-0.37 * t * t, 0};
  exp(x, batch, 11);
  for (int t = 0; t < 11; ++t) {
    EXPECT_EQ(batch[t].hi, exp(x[t]).hi);
    EXPECT_EQ(batch[t].lo, exp(x[t]).lo);
  }
}

TEST(DoubleDouble, AddAndMulStayWithinTheirChargedErrors) {
  std::mt19937_64 rng(7);
  double worst_add = 0, worst_mul = 0;
  for (int n = 0; n < 200000; ++n) {
    const DD x = near(std::ldexp(uniform(rng, -1, 1), int(rng() % 80) - 40), rng);
    const DD y = near(std::ldexp(uniform(rng, -1, 1), int(rng() % 80) - 40), rng);
    Big sum(x), product(x), other(y);
    mpfr_add(sum.x, sum.x, other.x, MPFR_RNDN);
    mpfr_mul(product.x, product.x, other.x, MPFR_RNDN);
    if (mpfr_zero_p(sum.x) == 0) {
      const double e = relative_error(add(x, y), sum);
      ASSERT_LE(e, kAddError);
      worst_add = std::max(worst_add, e);
    }
    const double e = relative_error(mul(x, y), product);
    ASSERT_LE(e, kMulError);
    worst_mul = std::max(worst_mul, e);
  }
  std::printf("largest relative error: add %.2f u^2 (charged %.0f), mul %.2f u^2 (charged %.0f)\n", worst_add / kU2,
              kAddError / kU2, worst_mul / kU2, kMulError / kU2);
}

TEST(DoubleDouble, SplitIsExactInTwoHalves) {
  std::mt19937_64 rng(3);
  for (int n = 0; n < 100000; ++n) {
    const double a = std::ldexp(uniform(rng, -1, 1), int(rng() % 1800) - 900);
    const DD halves = split(a);
    ASSERT_EQ(halves.hi + halves.lo, a);
    // Each half times any float is exact in double: 26 + 24 bits.
    for (const double half : {halves.hi, halves.lo}) {
      const float f = float(uniform(rng, -1, 1));
      ASSERT_EQ(std::fma(half, double(f), -(half * double(f))), 0.0) << a;
    }
  }
}

}  // namespace
}  // namespace attncheck::dd
