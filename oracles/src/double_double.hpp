// Double-double ("double-word") arithmetic for the oracle's fast path: a value hi + lo, two
// doubles. Each operation's relative error is charged to the bound (docs/error-bound.md, "The
// oracle's own error"), in units of u^2 = 2^-106:
//   add: Joldes, Muller and Popescu's AccurateDWPlusDW (ACM TOMS 44(2), 2017, Algorithm 6),
//        proved within 3u^2 + 13u^3; charged kAddError = 4u^2.
//   mul: their DWTimesDW3 (Algorithm 12, with FMA), proved within 4u^2 (5u^2 in the first
//        version); charged kMulError = 6u^2.
// Every result is normalized (|lo| <= ulp(hi) / 2). The code needs IEEE double without
// contraction of a * b + c into an FMA behind its back: oracles/ compiles with -ffp-contract=off.
#pragma once

#include <cmath>
#include <cstddef>

namespace attncheck::dd {

constexpr double kU2 = 0x1p-106;
constexpr double kAddError = 4 * kU2;
constexpr double kMulError = 6 * kU2;

struct DD {
  double hi = 0, lo = 0;
};

// a + b = s + e exactly (Knuth's TwoSum, no condition on a and b).
inline DD two_sum(double a, double b) {
  const double s = a + b, z = s - a;
  return {s, (a - (s - z)) + (b - z)};
}
// a + b = s + e exactly, given |a| >= |b| or a = 0 (Dekker's Fast2Sum).
inline DD fast_two_sum(double a, double b) {
  const double s = a + b;
  return {s, b - (s - a)};
}
// a b = p + e exactly (barring underflow), by FMA.
inline DD two_prod(double a, double b) {
  const double p = a * b;
  return {p, std::fma(a, b, -p)};
}

// a = hi + lo exactly, each half with at most 26 significant bits (Veltkamp's split), for |a| < 2^995.
inline DD split(double a) {
  const double t = 134217729.0 * a;  // 2^27 + 1
  const double hi = t - (t - a);
  return {hi, a - hi};
}

// x + y (AccurateDWPlusDW).
inline DD add(DD x, DD y) {
  const DD s = two_sum(x.hi, y.hi), t = two_sum(x.lo, y.lo);
  const DD v = fast_two_sum(s.hi, s.lo + t.hi);
  return fast_two_sum(v.hi, t.lo + v.lo);
}
inline DD neg(DD x) { return {-x.hi, -x.lo}; }

// x y (DWTimesDW3).
inline DD mul(DD x, DD y) {
  const DD c = two_prod(x.hi, y.hi);
  const double t0 = x.lo * y.lo, t1 = std::fma(x.hi, y.lo, t0), c2 = std::fma(x.lo, y.hi, t1);
  return fast_two_sum(c.hi, c.lo + c2);
}

// Whether x < y, for normalized values.
inline bool less(DD x, DD y) { return x.hi < y.hi || (x.hi == y.hi && x.lo < y.lo); }

// e^x for x <= 0, relative error at most kExpError + 2^-1074 / result (its lo part may be
// subnormal); 0 below -745.2, where e^x < 2^-1075 (derivation in docs/error-bound.md).
constexpr double kExpError = 16 * kU2;
DD exp(DD x);
// result[t] = exp(x[t]) for t < count, each as exp(x[t]) gives it, several at once.
void exp(const DD* x, DD* result, size_t count);

}  // namespace attncheck::dd
