#include "double_double.hpp"

#include <mpfr.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

namespace attncheck::dd {
namespace {

// The constants, from MPFR at 256 bits, each rounded once.
struct Constants {
  // ln(2) / 64 = L1 + L2 + L3 to about 2^-160 relative; L1 has 32 significant bits, so that k L1
  // is exact for |k| < 2^21.
  double L1, L2, L3;
  std::array<DD, 11> taylor;  // c_m = 1 / (m + 1)!, so that e^r = 1 + r sum_m c_m r^m
  std::array<DD, 64> table;   // 2^(i/64)
  Constants() {
    mpfr_t exact, rest;
    mpfr_inits2(256, exact, rest, (mpfr_ptr) nullptr);
    mpfr_const_log2(exact, MPFR_RNDN);
    mpfr_div_ui(exact, exact, 64, MPFR_RNDN);
    mpfr_set(rest, exact, MPFR_RNDN);
    mpfr_t l1;
    mpfr_init2(l1, 32);
    mpfr_set(l1, exact, MPFR_RNDN);
    L1 = mpfr_get_d(l1, MPFR_RNDN);
    mpfr_clear(l1);
    mpfr_sub_d(rest, rest, L1, MPFR_RNDN);
    L2 = mpfr_get_d(rest, MPFR_RNDN);
    mpfr_sub_d(rest, rest, L2, MPFR_RNDN);
    L3 = mpfr_get_d(rest, MPFR_RNDN);
    auto split = [&](mpfr_t x) {  // x rounded to a double-double: within u^2 relative
      DD d;
      d.hi = mpfr_get_d(x, MPFR_RNDN);
      mpfr_sub_d(rest, x, d.hi, MPFR_RNDN);
      d.lo = mpfr_get_d(rest, MPFR_RNDN);
      return d;
    };
    mpfr_set_ui(exact, 1, MPFR_RNDN);
    for (size_t m = 0; m < taylor.size(); ++m) {
      mpfr_div_ui(exact, exact, unsigned(m + 1), MPFR_RNDN);
      taylor[m] = split(exact);
    }
    for (size_t i = 0; i < table.size(); ++i) {
      mpfr_set_ui(exact, unsigned(i), MPFR_RNDN);
      mpfr_div_ui(exact, exact, 64, MPFR_RNDN);
      mpfr_exp2(exact, exact, MPFR_RNDN);
      table[i] = split(exact);
    }
    mpfr_clears(exact, rest, (mpfr_ptr) nullptr);
  }
};

const Constants& constants() {
  static const Constants c;
  return c;
}

}  // namespace

#if defined(__x86_64__)
// With hardware FMA where the processor has it (the same results: std::fma rounds once either way).
__attribute__((target_clones("fma", "default")))
#endif
void exp(const DD* x, DD* result, size_t count) {
  // Reduction: x = k ln2/64 + r, k = 64 q + i, |r| <= ln2/128 (plus x.lo): e^x = 2^q 2^(i/64) e^r.
  // Eight values at a time, stage by stage, so that their dependency chains interleave.
  const Constants& c = constants();
  constexpr size_t kBlock = 8;
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t n = std::min(kBlock, count - start);
    const DD* xb = x + start;
    double k[kBlock], tail[kBlock];
    DD r[kBlock], p[kBlock];
    for (size_t t = 0; t < n; ++t) {
      // Round to nearest by the 1.5 2^52 trick (|x.hi 64 / ln 2| < 2^17), without a library call.
      const double hi = xb[t].hi >= -745.2 ? xb[t].hi : 0;  // the others give 0 below
      k[t] = (hi * (64 / 0.6931471805599453) + 0x1.8p52) - 0x1.8p52;
      // hi - k L1 is exact (k L1 has 49 bits; Sterbenz for k != 0), k L2 exact as a pair.
      r[t] = add(add(add({hi - k[t] * c.L1, 0}, neg(two_prod(k[t], c.L2))), {xb[t].lo, 0}), {-k[t] * c.L3, 0});
    }
    // e^r - 1 = r P(r), P = sum_{m<11} c_m r^m by Horner, truncated below 2^-119 (|r| < 0.00542,
    // 12th term). An absolute error d in the partial sum from c_m on moves e^r by |r|^(m+1) d, so
    // from c_5 on double suffices (relative 2^-50 on a value below 1/720: |r|^6 2^-59 < 2^-104).
    for (size_t t = 0; t < n; ++t) tail[t] = c.taylor.back().hi;
    for (size_t m = c.taylor.size() - 1; m-- > 5;)
      for (size_t t = 0; t < n; ++t) tail[t] = c.taylor[m].hi + r[t].hi * tail[t];
    for (size_t t = 0; t < n; ++t) p[t] = {tail[t], 0};
    for (size_t m = 5; m-- > 0;)
      for (size_t t = 0; t < n; ++t) p[t] = add(c.taylor[m], mul(r[t], p[t]));
    for (size_t t = 0; t < n; ++t) {
      const DD e_r = add({1, 0}, mul(r[t], p[t]));
      const long i = long(k[t]) & 63, q = (long(k[t]) - i) / 64;
      const DD e = mul(e_r, c.table[size_t(i)]);
      // Times 2^q, -1076 <= q <= 0: exact while normal; below, one rounding (2^(q + 600) keeps e normal).
      auto power = [](long p) { return std::bit_cast<double>(uint64_t(p + 1023) << 52); };
      const double scale = q >= -1022 ? power(q) : power(q + 600), rest = q >= -1022 ? 1 : power(-600);
      result[start + t] = xb[t].hi >= -745.2 ? DD{e.hi * scale * rest, e.lo * scale * rest} : DD{0, 0};
    }
  }
}

DD exp(DD x) {
  DD result;
  exp(&x, &result, 1);
  return result;
}

}  // namespace attncheck::dd
