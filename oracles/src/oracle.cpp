#include "attncheck/oracle.hpp"

#include <algorithm>
#include <atomic>
#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <thread>

#include "attncheck/bound.hpp"
#include "attncheck/precision.hpp"
#include "attncheck/rows.hpp"
#include "double_double.hpp"

namespace attncheck {
namespace {

using dd::DD;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// 200 bits, for the two values computed once per problem or row: the default scale's
// 1/sqrt(dk) and the log of the row's normalizer.
using Exact = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<60>, boost::multiprecision::et_off>;

// The oracle's own reading of the masks, written apart from impl/'s on purpose (contract.md, Masks).
bool key_permitted(const Masks& masks, const Shape& s, int64_t b, int64_t i, int64_t j) {
  if (masks.allow && masks.allow[s.allow_at(b, i) + j] == 0) return false;
  if (masks.key_lengths && j >= masks.key_lengths[b]) return false;
  const int64_t diagonal = i + s.Tk - s.Tq;  // the window is centred on the lower-right diagonal
  if (masks.window_left >= 0 && j < diagonal - masks.window_left) return false;
  if (masks.window_right >= 0 && j > diagonal + masks.window_right) return false;
  if (masks.causal == Causal::upper_left) return j - i <= 0;
  if (masks.causal == Causal::lower_right) return j - i <= s.Tk - s.Tq;
  if (masks.causal == Causal::kv_end) return j - i <= (masks.key_lengths ? masks.key_lengths[b] : s.Tk) - s.Tq;
  return true;
}

// Ogita, Rump and Oishi's Dot2 (SIAM J. Sci. Comput. 26(6), 2005), kept unevaluated as hi + lo,
// over four interleaved chains merged by TwoSum: every rounding error of every TwoProduct and
// TwoSum is kept in lo, so Dot2's bound (dot2_error) holds whatever the order of the sums.
// x [n] at stride 1, y [n] at stride y_stride; also returns sum |x y| (rounded, of finite terms).
template <class X, class Y>
DD dot2(const X* x, const Y* y, int64_t y_stride, int64_t n, double& abs_sum) {
  double hi[4] = {0, 0, 0, 0}, lo[4] = {0, 0, 0, 0}, size[4] = {0, 0, 0, 0};
  int64_t k = 0;
  // A product of two floats is exact in double (48 bits, and 2^-298 to 2^256): no TwoProduct.
  constexpr bool exact_products = (Precision<X>::fraction_bits + 1) + (Precision<Y>::fraction_bits + 1) <= 53 &&
                                  Precision<X>::exponent_bits <= 8 && Precision<Y>::exponent_bits <= 8;
  auto step = [&](int lane, double a, double b) {
    const DD product = exact_products ? DD{a * b, 0} : dd::two_prod(a, b), sum = dd::two_sum(hi[lane], product.hi);
    hi[lane] = sum.hi;
    lo[lane] += product.lo + sum.lo;
    size[lane] += std::fabs(product.hi);
  };
  for (; k + 4 <= n; k += 4)
    for (int lane = 0; lane < 4; ++lane) step(lane, double(x[k + lane]), double(y[(k + lane) * y_stride]));
  for (; k < n; ++k) step(0, double(x[k]), double(y[k * y_stride]));
  DD total{hi[0], lo[0]};
  for (int lane = 1; lane < 4; ++lane) {
    const DD sum = dd::two_sum(total.hi, hi[lane]);
    total = {sum.hi, total.lo + lo[lane] + sum.lo};
  }
  abs_sum = (size[0] + size[1]) + (size[2] + size[3]);
  return total;
}

// The IEEE value of a dot product with an inf or NaN factor: NaN if a term is NaN (a NaN factor,
// inf times 0) or terms of both infinite signs meet, else the infinity of the infinite terms.
template <class T>
double special_dot(const T* x, const T* y, int64_t n) {
  bool plus = false, minus = false;
  for (int64_t k = 0; k < n; ++k) {
    const double term = double(x[k]) * double(y[k]);  // finite terms cannot reach inf in double from T's range
    if (std::isnan(term)) return kNaN;
    plus |= term == kInf;
    minus |= term == -kInf;
  }
  return plus && minus ? kNaN : plus ? kInf : -kInf;
}

// What every query row of one (b, KV head) needs of its keys, computed once for all of them.
struct KeyFacts {
  std::vector<double> flush;     // [Tk] tiny sum_k |k_jk| over finite terms, rounded up
  std::vector<double> max_abs;   // [Tk] max_k |k_jk| over finite terms
  std::vector<uint8_t> finite;   // [Tk] every k_jk finite
  std::vector<uint8_t> plain_v;  // [Tk] every v_jc finite and below 2^995, so that it splits exactly
};
template <class T>
KeyFacts key_facts(const Problem<T>& p, int64_t b, int64_t kv_h, double tiny) {
  // K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv] in.
  const Shape& s = p.shape;
  KeyFacts f{std::vector<double>(size_t(s.Tk)), std::vector<double>(size_t(s.Tk)), std::vector<uint8_t>(size_t(s.Tk)),
             std::vector<uint8_t>(size_t(s.Tk))};
  for (int64_t j = 0; j < s.Tk; ++j) {
    const T* k_j = p.k + s.k_at(b, kv_h * (s.H / s.kv_heads()), j);  // the first query head reading kv_h
    double flush = 0, max_abs = 0;
    bool finite = true;
    for (int64_t k = 0; k < s.dk; ++k) {
      const bool ok = std::isfinite(k_j[k]);
      finite &= ok;
      flush += ok ? tiny * std::fabs(double(k_j[k])) : 0;
      max_abs = std::max(max_abs, ok ? std::fabs(double(k_j[k])) : 0.0);
    }
    f.flush[size_t(j)] = inflate(flush, s.dk);
    f.max_abs[size_t(j)] = max_abs;
    f.finite[size_t(j)] = finite;
    const T* v_j = p.v + s.v_at(b, kv_h * (s.H / s.kv_heads()), j);
    bool plain = true;
    for (int64_t c = 0; c < s.dv; ++c) plain &= std::fabs(double(v_j[c])) < 0x1p995;  // false for inf and NaN
    f.plain_v[size_t(j)] = plain;
  }
  return f;
}

// The scale as a double-double: the given double, or 1/sqrt(dk) from 200 bits (within u^2).
DD scale_of(const Shape& s, double scale) {
  if (scale != 0) return {scale, 0};
  const Exact exact = 1 / sqrt(Exact(s.dk));
  const double hi = exact.convert_to<double>();
  return {hi, Exact(exact - hi).convert_to<double>()};
}

// cap tanh(scale qk / cap) at 200 bits, rounded to a double-double (u^2): the soft-capped score.
DD softcapped(DD scale, DD qk, double cap) {
  Exact x = (Exact(scale.hi) + scale.lo) * (Exact(qk.hi) + qk.lo);
  x = tanh(x / cap) * cap;
  const double hi = x.convert_to<double>();
  return {hi, Exact(x - hi).convert_to<double>()};
}

template <class T>
ExactRow mean_row(const Problem<T>& p, int64_t b, int64_t h);

// Row (b, h) with no permitted key, as the empty-row policy says (`row` holds its out [dv], 0, and
// bounds). zero and nan: exact, so the bound is 0 (inside T's range); any: nothing checked; mean:
// the row of equal scores over all keys, its lse unchecked.
template <class T>
ExactRow empty_row(const Problem<T>& p, int64_t b, int64_t h, ExactRow row) {
  row.empty = true;
  switch (p.empty_rows) {
    case EmptyRows::zero:
      row.lse = p.lse_empty == LseEmpty::zero ? 0 : -kInf;
      return row;
    case EmptyRows::nan:
      row.lse = kNaN;
      row.out.assign(row.out.size(), kNaN);
      return row;
    case EmptyRows::mean:
      row = mean_row(p, b, h);
      break;
    case EmptyRows::any:
      row.out.assign(row.out.size(), kNaN);
      row.bound.assign(row.out.size(), kInf);
      row.natural.assign(row.out.size(), kNaN);
      break;
  }
  row.lse = kNaN;
  row.lse_bound = kInf;
  row.lse_natural = kNaN;
  row.empty = true;
  return row;
}

// Passes of row_body below, each inlined into it (and so into its FMA clone, row_of): row (b, h, i)
// of Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], bias [B,H,Tq,Tk].
template <class T>
struct RowPass {
  const Problem<T>& p;
  const Shape& s;
  const KeyFacts& keys;
  const Arithmetic arith;
  int64_t b, h, i;
  const T* q_i;     // [dk]
  const T* bias_i;  // [Tk], or null
};

// The magnitudes of q_i for the bound and the range, from finite terms only (double, rounded up).
// Flushing sums are taken in units of tiny, so that they cannot overflow: tiny |x| <= 4 for any
// finite x.
struct QueryFacts {
  double flush = 0, max = 0;
  bool finite = true;
};
template <class T>
[[gnu::always_inline]] inline QueryFacts query_facts(const RowPass<T>& r) {
  QueryFacts q;
  for (int64_t k = 0; k < r.s.dk; ++k) {
    const bool ok = std::isfinite(r.q_i[k]);
    q.finite &= ok;
    q.flush += ok ? r.arith.tiny * std::fabs(double(r.q_i[k])) : 0;
    q.max = std::max(q.max, ok ? std::fabs(double(r.q_i[k])) : 0.0);
  }
  q.flush = inflate(q.flush, r.s.dk);
  return q;
}

// s_j of key k_j [dk], with |q . k_j|'s finite terms summed into qk_abs and, under a soft-cap, its
// slope 1 - tanh^2 into `slope`. Finite inputs in double-double; else the IEEE special value.
template <class T>
[[gnu::always_inline]] inline DD score_of(const RowPass<T>& r, const T* k_j, DD scale, double bias, bool finite, double& qk_abs,
                                          long double& slope) {
  const double softcap = r.p.softcap;
  if (finite) {
    const DD qk = dot2(r.q_i, k_j, 1, r.s.dk, qk_abs);
    DD s_j = softcap != 0 ? softcapped(scale, qk, softcap) : dd::mul(scale, dd::two_sum(qk.hi, qk.lo));
    if (softcap != 0) {
      const long double x = ((long double)s_j.hi + s_j.lo) / softcap;  // tanh(t / cap)
      slope = (1 - x) * (1 + x);
    }
    if (r.bias_i) s_j = dd::add(s_j, {bias, 0});
    return s_j;
  }
  for (int64_t k = 0; k < r.s.dk; ++k)
    if (std::isfinite(r.q_i[k]) && std::isfinite(k_j[k])) qk_abs += std::fabs(double(r.q_i[k]) * double(k_j[k]));
  const double t = special_dot(r.q_i, k_j, r.s.dk) * scale.hi;  // inf or NaN; a soft-cap takes inf to +-cap
  return {(softcap != 0 && std::isinf(t) ? std::copysign(softcap, t) : t) + bias, 0};
}

// Pass 1, scores: s_j = scale q . k_j + bias_j as double-doubles, over permitted keys whose score is
// not -inf, into row.keys and `score`. A NaN or +inf score makes the row special (the result):
// every output NaN. The row is in T's range when no permitted key's finite terms can overflow T, in
// any order, before or after scaling. input_error [Tk] or null.
template <class T>
[[gnu::always_inline]] inline bool scores(const RowPass<T>& r, DD scale, const double* input_error, ExactRow& row,
                                          RowFacts& facts, std::vector<DD>& score) {
  const Shape& s = r.s;
  const double scale_up = std::nextafter(std::fabs(scale.hi), kInf);
  const QueryFacts q = query_facts(r);
  bool special = false;
  for (int64_t j = 0; j < s.Tk; ++j) {
    if (!key_permitted(r.p.masks, s, r.b, r.i, j)) continue;
    const double bias = r.bias_i ? double(r.bias_i[j]) : 0;
    if (bias == -kInf) continue;  // forbidden, its key unread
    const T* k_j = r.p.k + s.k_at(r.b, r.h, j);
    double qk_abs = 0;
    long double slope = 1;  // d s_j / d (scale q . k_j): 1 - tanh^2 under a soft-cap
    const DD s_j = score_of(r, k_j, scale, bias, q.finite && r.keys.finite[size_t(j)], qk_abs, slope);
    qk_abs = inflate(qk_abs, s.dk);
    const double score_size = inflate(scale_up * qk_abs + std::fabs(std::isfinite(bias) ? bias : 0), 2);
    // Every order must fit, with room for log2(e): q . k before scaling, c q or c k before the dot.
    facts.scores_in_range &=
        2 * std::max(1.0, scale_up) * std::max({qk_abs, score_size, q.max, r.keys.max_abs[size_t(j)]}) < r.arith.max_finite;
    if (s_j.hi == -kInf) continue;
    special |= !std::isfinite(s_j.hi);  // NaN or +inf; a finite product that overflows double is out of range
    row.keys.push_back(j);
    score.push_back(s_j);
    if (r.p.softcap != 0) row.cap_slope.push_back(slope);
    facts.score_size.push_back(score_size);
    // An error of the inputs the kernel computes the scores from counts as a score error too.
    const double own = inflate(scale_up * dot2_error(s.dk, qk_abs), 1);
    facts.oracle_score_error.push_back(input_error ? inflate(own + input_error[j], 1) : own);
    // Flushing, in any order of scaling: a subnormal q_k or k_k read as 0, a scaled c q_k or c k_k
    // flushed (tiny, not c tiny, times the other factor), and each of the dk products and dk - 1
    // sums flushed: max(1, c) tiny (2 dk + sum |q| + sum |k|).
    facts.flush_error.push_back(
        inflate(std::max(1.0, scale_up) * (r.arith.tiny * double(2 * s.dk) + q.flush + r.keys.flush[size_t(j)]), 3));
  }
  return special;
}

// Pass 2, exp and sum: e_j = exp(s_j - m) in double-double, l = sum_j e_j; p_j = e_j / l; and the
// log-sum-exp at 200 bits, lse = m + log l. e [n] out.
[[gnu::always_inline]] inline DD exp_and_sum(const std::vector<DD>& score, ExactRow& row, RowFacts& facts, std::vector<DD>& e,
                                             DD& l) {
  const int64_t n = int64_t(score.size());
  DD m = score[0];
  for (const DD& s_j : score)
    if (dd::less(m, s_j)) m = s_j;
  std::vector<DD> x(static_cast<size_t>(n));
  e.resize(size_t(n));
  for (int64_t j = 0; j < n; ++j) x[size_t(j)] = dd::add(score[size_t(j)], dd::neg(m));  // <= 0
  dd::exp(x.data(), e.data(), x.size());
  l = DD{0, 0};
  for (int64_t j = 0; j < n; ++j) {
    l = dd::add(l, e[size_t(j)]);
    const double gap = x[size_t(j)].lo < 0 ? std::nextafter(-x[size_t(j)].hi, kInf) : -x[size_t(j)].hi;  // m - s_j, rounded up
    facts.gap.push_back(gap);
    // The oracle's score, argument and exp, charged as an error of this score: 11u^2 S_j for the
    // product with the scale and the bias, 4u^2 gap_j for s_j - m, the exp's 16u^2 and its lo part's
    // underflow (double_double.hpp); 2^-100 = 64u^2 covers the constants.
    facts.oracle_score_error[size_t(j)] +=
        0x1p-100 * (facts.score_size[size_t(j)] + gap + 1) + (e[size_t(j)].hi > 0 ? 0x1p-1073 / e[size_t(j)].hi : 0);
  }
  // l's sum: n double-double additions, and the terms below 2^-1075 that exp dropped (below 2^-1074 each, relative to l >= 1).
  facts.oracle_weight_error = double(n) * (dd::kAddError + 0x1p-1074);

  Exact lse = Exact(l.hi) + l.lo;
  lse = log(lse) + m.hi + m.lo;
  row.lse = lse.convert_to<long double>();
  const double log_l = std::log(l.hi);
  row.weights.resize(size_t(n));
  const long double l_ld = (long double)l.hi + l.lo;
  for (int64_t j = 0; j < n; ++j) {
    row.weights[size_t(j)] = ((long double)e[size_t(j)].hi + e[size_t(j)].lo) / l_ld;
    facts.weight.push_back(double(row.weights[size_t(j)]));
    facts.log_weight.push_back(-facts.gap[size_t(j)] - log_l);
  }
  return m;
}

// Pass 3, the output: o_c = (sum_j e_j v_jc) / l, every column a chain of its own. e_j.hi is split
// in two 26-bit halves (Veltkamp), and so is a double v_jc (a float has 24 bits), so that the
// products of halves are exact: the large one is summed with TwoSum into hi (its errors kept), the
// others and e_j.lo v_jc, each within 2^-25 of |e_j v_jc|, in lo. A column with an inf or NaN
// value takes its IEEE special value: every permitted key has a positive exact weight, so p inf =
// inf even where p underflows. v_abs [n][dv] out, for the bound.
template <class T>
[[gnu::always_inline]] inline void weighted_sum(const RowPass<T>& r, const std::vector<DD>& e, DD l, ExactRow& row,
                                                RowFacts& facts, std::vector<double>& v_abs) {
  const Shape& s = r.s;
  const int64_t n = int64_t(row.keys.size());   // e's first n terms: a sink's (the last) has no value
  const T* v_bh = r.p.v + s.v_at(r.b, r.h, 0);  // [Tk,dv] of head h's KV head
  std::vector<double> hi(size_t(s.dv), 0), lo(hi);
  v_abs.assign(size_t(n * s.dv), 0);
  std::vector<uint8_t> nan(size_t(s.dv), 0), plus(nan), minus(nan);
  constexpr bool split_v = Precision<T>::fraction_bits > 25;
  // Dropout: a dropped key's term is 0, its value unread (v_abs 0 for the bound); the sum is
  // multiplied by rescale = 1 / (1 - p) (docs/error-bound.md, "Dropout").
  const uint8_t* keep_i = r.p.dropout_p > 0 ? r.p.dropout_keep + s.scores_at(r.b, r.h, r.i) : nullptr;
  const long double rescale = r.p.dropout_p > 0 ? 1 / (1 - (long double)r.p.dropout_p) : 1;
  for (int64_t j = 0; j < n; ++j) {
    if (keep_i && !keep_i[row.keys[size_t(j)]]) continue;
    const T* v_j = v_bh + row.keys[size_t(j)] * s.dv;
    const DD e_j = e[size_t(j)], a = dd::split(e_j.hi);
    auto add_term = [&](int64_t c, double v) {
      const DD b = split_v ? dd::split(v) : DD{v, 0};
      const DD sum = dd::two_sum(hi[size_t(c)], a.hi * b.hi);
      hi[size_t(c)] = sum.hi;
      lo[size_t(c)] += sum.lo + ((a.hi * b.lo + a.lo * b.hi) + (a.lo * b.lo + e_j.lo * v));
    };
    if (r.keys.plain_v[size_t(row.keys[size_t(j)])]) {  // the common case, without branches
      for (int64_t c = 0; c < s.dv; ++c) add_term(c, double(v_j[c]));
      for (int64_t c = 0; c < s.dv; ++c) v_abs[size_t(j * s.dv + c)] = std::fabs(double(v_j[c]));
      continue;
    }
    for (int64_t c = 0; c < s.dv; ++c) {
      const double v = double(v_j[c]);
      if (!std::isfinite(v)) {
        nan[size_t(c)] |= std::isnan(v);
        plus[size_t(c)] |= v == kInf;
        minus[size_t(c)] |= v == -kInf;
        continue;
      }
      v_abs[size_t(j * s.dv + c)] = std::fabs(v);
      if (split_v && !(std::fabs(v) < 0x1p995)) {  // too large to split: TwoProduct by FMA
        const DD product = dd::two_prod(e_j.hi, v), sum = dd::two_sum(hi[size_t(c)], product.hi);
        hi[size_t(c)] = sum.hi;
        lo[size_t(c)] += sum.lo + (product.lo + e_j.lo * v);
        continue;
      }
      add_term(c, v);
    }
  }
  const long double l_ld = (long double)l.hi + l.lo;
  for (int64_t c = 0; c < s.dv; ++c)
    row.out[size_t(c)] = nan[size_t(c)] || (plus[size_t(c)] && minus[size_t(c)]) ? kNaN
                         : plus[size_t(c)]                                       ? kInf
                         : minus[size_t(c)]                                      ? -kInf
                                            : ((long double)hi[size_t(c)] + lo[size_t(c)]) * rescale / l_ld;
  // hi + lo misses only the rounding of lo's 4n terms, each below 2^-25 |e_j v_jc| plus TwoSum's
  // errors (below n u sum_j |e_j v_jc| in all), and e_j.lo v_jc's (u^2): gamma_4n (2^-24 + n u) +
  // u^2 of sum_j e_j |v_jc|; then to long double, the division and the kept value, 4 eps_ld.
  // With dropout, rescale's own rounding and its product: 2 eps_ld more.
  facts.oracle_output_error = double(4 * n) * 0x1p-52 * (0x1p-24 + double(n) * 0x1p-53) + dd::kU2 +
                              (keep_i ? 6 : 4) * double(std::numeric_limits<long double>::epsilon());
  facts.dropout_p = r.p.dropout_p;
}

// The sink's term (contract.hpp), appended after the keys': a score of its own, exact (a float), its
// error charged as a score of its size would be, nothing flushed; pass 2 gives it its weight and
// its place in l and the lse, and pass 3 no value (docs/error-bound.md, "Sinks").
[[gnu::always_inline]] inline void sink_term(float sink, RowFacts& facts, std::vector<DD>& score) {
  score.push_back({double(sink), 0});
  facts.score_size.push_back(std::fabs(double(sink)));
  facts.oracle_score_error.push_back(0);
  facts.flush_error.push_back(0);
}

// The sink's term taken off the row's per-key vectors after its bound (they hold the keys alone),
// its weight kept apart.
inline void drop_sink_term(ExactRow& row) {
  row.sink_weight = row.weights.back();
  for (auto* v : {&row.score_error, &row.weight_error, &row.score_size, &row.score_flush, &row.gap}) v->pop_back();
  row.weights.pop_back();
}

template <class T>
[[gnu::always_inline]] inline ExactRow row_body(const Problem<T>& p, const KeyFacts& keys, DD scale, int64_t b, int64_t h,
                                                int64_t i, const double* input_error) {
  // Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], bias [B,H,Tq,Tk], input_error [Tk] or null in;
  // row (b, h, i) out.
  const Shape& s = p.shape;
  const RowPass<T> r{
      p, s, keys, Arithmetic::of(p.format), b, h, i, p.q + s.q_at(b, h, i), p.bias ? p.bias + s.scores_at(b, h, i) : nullptr};
  ExactRow row;
  RowFacts facts;
  facts.dk = s.dk;
  facts.softcap = p.softcap;
  std::vector<DD> score;
  const bool special = scores(r, scale, input_error, row, facts, score);
  const int64_t n = int64_t(row.keys.size());
  row.out.assign(size_t(s.dv), 0);
  row.bound.assign(size_t(s.dv), facts.scores_in_range ? 0 : kInf);
  row.lse_bound = facts.scores_in_range ? 0 : kInf;
  row.natural.assign(size_t(s.dv), 0);
  const bool sink = has_sink(p, h);
  if (n == 0 && !sink) return empty_row(p, b, h, std::move(row));
  if (special) {  // exp(inf - inf) or a NaN reaches every weight: special exact outputs, matched exactly
    row.lse = kNaN;
    row.out.assign(size_t(s.dv), kNaN);
    row.weights.assign(size_t(n), kNaN);
    return row;
  }
  if (sink) sink_term(p.sinks[h], facts, score);
  std::vector<DD> e;
  DD l;
  const DD m = exp_and_sum(score, row, facts, e, l);
  std::vector<double> v_abs;
  weighted_sum(r, e, l, row, facts, v_abs);
  if (sink) v_abs.resize(v_abs.size() + size_t(s.dv), 0);  // the sink's value: none

  // The bound of each output element (docs/error-bound.md).
  facts.max_abs = std::fabs(m.hi) * (1 + 0x1p-52);
  facts.lse_abs = double(std::fabs(row.lse)) * (1 + 0x1p-52);
  const LseBound lse_bound =
      bound_row(facts, r.arith, v_abs, s.dv, row.bound.data(), row.natural.data(), &row.score_error, &row.weight_error);
  row.score_size = facts.score_size;
  row.score_flush = facts.flush_error;
  row.gap = facts.gap;
  row.lse_bound = lse_bound.bound;
  row.lse_natural = lse_bound.natural;
  if (sink) drop_sink_term(row);
  return row;
}

// Row (b, h, i), compiled twice where the processor may have FMA (as dd::exp: the same results,
// faster); a function template cannot be, so one function per precision.
#if defined(__x86_64__)
#define ATTNCHECK_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define ATTNCHECK_FMA_CLONES
#endif
ATTNCHECK_FMA_CLONES ExactRow row_of(const Problem<float>& p, const KeyFacts& keys, DD scale, int64_t b, int64_t h, int64_t i,
                                     const double* input_error = nullptr) {
  return row_body(p, keys, scale, b, h, i, input_error);
}
ATTNCHECK_FMA_CLONES ExactRow row_of(const Problem<double>& p, const KeyFacts& keys, DD scale, int64_t b, int64_t h, int64_t i,
                                     const double* input_error = nullptr) {
  return row_body(p, keys, scale, b, h, i, input_error);
}

// The mean of the values of row (b, h)'s KV head over all Tk keys, with its bound: the row of a
// problem whose one query sees every key with the score 0 (q and k zero), the softmax of equal
// scores that a finite mask value gives every key of an empty row. V [B,H_kv,Tk,dv] in.
template <class T>
ExactRow mean_row(const Problem<T>& p, int64_t b, int64_t h) {
  const std::vector<T> zeros(size_t(p.shape.Tk), T(0));
  Problem<T> equal;
  equal.shape = {1, 1, 1, p.shape.Tk, 1, p.shape.dv};
  equal.q = zeros.data();
  equal.k = zeros.data();
  equal.v = p.v + p.shape.v_at(b, h, 0);
  equal.scale = 1;
  equal.format = p.format;
  return row_of(equal, key_facts(equal, 0, 0, Arithmetic::of(p.format).tiny), scale_of(equal.shape, 1), 0, 0, 0);
}

// ATTNCHECK_THREADS if set, else every core.
unsigned thread_count() {
  const char* text = std::getenv("ATTNCHECK_THREADS");
  const long wanted = text && *text ? std::strtol(text, nullptr, 10) : 0;
  return wanted > 0 ? unsigned(wanted) : std::max(1u, std::thread::hardware_concurrency());
}

// body(row) for every row in `rows` on the oracle's threads, handed out 16 at a time; on this
// thread alone when they hold fewer than 2^16 query-key pairs (starting threads would cost more).
template <class F>
void parallel_rows(const std::vector<int64_t>& rows, int64_t keys_per_row, F body) {
  constexpr size_t kChunk = 16;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t at; (at = next.fetch_add(kChunk)) < rows.size();)
      for (size_t r = at; r < std::min(rows.size(), at + kChunk); ++r) body(rows[r]);
  };
  const bool small = int64_t(rows.size()) * keys_per_row < (int64_t(1) << 16);
  const unsigned threads = small ? 1 : unsigned(std::min<size_t>(thread_count(), (rows.size() + kChunk - 1) / kChunk));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back([&] {
      work();
      mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);  // MPFR's per-thread caches (log 2, ...) die with the thread
    });
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace

// The oracle applies the kernel's dropout mask; it draws none of its own.
template <class T>
void require_keep_mask(const Problem<T>& p) {
  if (p.dropout_p > 0 && !p.dropout_keep)
    throw std::logic_error("the oracle computes dropout for a given keep mask, and the problem has none");
}

// Each entry point below computes on a paged or varlen problem's dense twin (dense_of, contract.hpp):
// each is an index map (the keys gathered; the sequences one block-diagonal mask over the packed
// rows), nothing the derivation sees (docs/error-bound.md, "Paged KV" and "Varlen").
template <class T>
ExactRow exact_row(const Problem<T>& given, int64_t b, int64_t h, int64_t i, const double* input_score_error) {
  TwinBuffers<T> twin;
  const Problem<T> p = dense_of(given, twin);
  require_keep_mask(p);
  return row_of(p, key_facts(p, b, p.shape.kv_head(h), Arithmetic::of(p.format).tiny), scale_of(p.shape, p.scale), b, h, i,
                input_score_error);
}

namespace {

// body(r, row) for every row r = (b H + h) Tq + i set in wanted [B*H*Tq], on the oracle's threads,
// the facts of each (b, KV head)'s keys computed once.
template <class T, class F>
void for_rows(const Problem<T>& given, const std::vector<uint8_t>& wanted, F body) {
  // Q, K, V, bias in.
  TwinBuffers<T> twin;
  const Problem<T> p = dense_of(given, twin);
  require_keep_mask(p);
  const Shape& s = p.shape;
  const DD scale = scale_of(s, p.scale);
  const double tiny = Arithmetic::of(p.format).tiny;
  std::vector<int64_t> rows;                                   // (b H + h) Tq + i
  std::vector<uint8_t> needed(size_t(s.B * s.kv_heads()), 0);  // the (b, KV head) pairs they read
  for (int64_t r = 0; r < s.B * s.H * s.Tq; ++r)
    if (wanted[size_t(r)]) {
      rows.push_back(r);
      needed[size_t(r / (s.H * s.Tq) * s.kv_heads() + s.kv_head(r / s.Tq % s.H))] = 1;
    }
  std::vector<KeyFacts> keys(needed.size());
  for (size_t at = 0; at < needed.size(); ++at)
    if (needed[at]) keys[at] = key_facts(p, int64_t(at) / s.kv_heads(), int64_t(at) % s.kv_heads(), tiny);
  parallel_rows(rows, s.Tk, [&](int64_t r) {
    const int64_t b = r / (s.H * s.Tq), h = r / s.Tq % s.H, i = r % s.Tq;
    body(r, row_of(p, keys[size_t(b * s.kv_heads() + s.kv_head(h))], scale, b, h, i));
  });
}

}  // namespace

template <class T>
std::vector<ExactRow> exact_rows(const Problem<T>& p) {
  std::vector<ExactRow> rows(size_t(p.shape.lse_size()));  // [B*H*Tq]
  for_rows(p, std::vector<uint8_t>(rows.size(), 1), [&](int64_t r, ExactRow row) { rows[size_t(r)] = std::move(row); });
  return rows;
}

template <class T>
void add_rows(const Problem<T>& p, const std::vector<uint8_t>& wanted, Reference& ref) {
  // Q, K, V, bias in; wanted [B*H*Tq]; ref.out [B,H,Tq,dv] and ref.lse [B,H,Tq] filled where wanted.
  const Shape& s = p.shape;
  for_rows(p, wanted, [&](int64_t r, const ExactRow& row) {
    const int64_t b = r / (s.H * s.Tq), h = r / s.Tq % s.H, i = r % s.Tq;
    const size_t at = size_t(s.out_at(b, h, i)), n = size_t(s.lse_at(b, h, i));
    std::copy(row.out.begin(), row.out.end(), ref.out.exact.begin() + at);
    std::copy(row.bound.begin(), row.bound.end(), ref.out.bound.begin() + at);
    std::copy(row.natural.begin(), row.natural.end(), ref.out.natural.begin() + at);
    ref.lse.exact[n] = row.lse;
    ref.lse.bound[n] = row.lse_bound;
    ref.lse.natural[n] = row.lse_natural;
    for (ExactTensor* t : {&ref.out, &ref.lse})
      if (!t->exact_rows.empty()) t->exact_rows[size_t(r)] = 1;
  });
}

template <class T>
Reference reference(const Problem<T>& given, const std::vector<uint8_t>* rows) {
  // Q, K, V, bias in; out [B,H,Tq,dv] and lse [B,H,Tq] out.
  TwinBuffers<T> twin;
  const Problem<T> p = dense_of(given, twin);
  const Shape& s = p.shape;
  const std::vector<uint8_t> chosen = rows ? *rows : default_rows(p);  // empty: every row
  const bool sampled = !chosen.empty();
  Reference ref;
  ref.out.name = "out";
  ref.out.dims = {s.B, s.H, s.Tq, s.dv};
  ref.out.row_size = s.dv;
  ref.lse.name = "lse";
  ref.lse.dims = {s.B, s.H, s.Tq};
  ref.lse.infinities_exact = true;
  ref.out.format = p.format;
  ref.lse.format = Precision<T>::format;
  for (ExactTensor* t : {&ref.out, &ref.lse}) {
    const size_t size = size_t(t == &ref.out ? s.out_size() : s.lse_size());
    t->exact.assign(size, sampled ? kNaN : 0);
    t->bound.assign(size, sampled ? kInf : 0);
    t->natural.assign(size, sampled ? kNaN : 0);
    if (sampled) t->exact_rows.assign(size_t(s.lse_size()), 0);
  }
  add_rows(p, sampled ? chosen : std::vector<uint8_t>(size_t(s.lse_size()), 1), ref);
  return ref;
}

template ExactRow exact_row(const Problem<float>&, int64_t, int64_t, int64_t, const double*);
template ExactRow exact_row(const Problem<double>&, int64_t, int64_t, int64_t, const double*);
template std::vector<ExactRow> exact_rows(const Problem<float>&);
template std::vector<ExactRow> exact_rows(const Problem<double>&);
template Reference reference(const Problem<float>&, const std::vector<uint8_t>*);
template Reference reference(const Problem<double>&, const std::vector<uint8_t>*);
template void add_rows(const Problem<float>&, const std::vector<uint8_t>&, Reference&);
template void add_rows(const Problem<double>&, const std::vector<uint8_t>&, Reference&);

}  // namespace attncheck
