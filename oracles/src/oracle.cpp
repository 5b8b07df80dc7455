#include "attncheck/oracle.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attncheck/bound.hpp"

namespace attncheck {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The oracle's own reading of the masks, written apart from impl/'s on purpose (contract.md, Masks).
bool key_permitted(const Masks& masks, const Shape& s, int64_t b, int64_t i, int64_t j) {
  if (masks.allow && masks.allow[s.allow_at(b, i) + j] == 0) return false;
  if (masks.key_lengths && j >= masks.key_lengths[b]) return false;
  if (masks.causal == Causal::upper_left) return j - i <= 0;
  if (masks.causal == Causal::lower_right) return j - i <= s.Tk - s.Tq;
  return true;
}

mpfr_ptr raw(Exact& x) { return x.backend().data(); }

// Ogita, Rump and Oishi's Dot2 (SIAM J. Sci. Comput. 26(6), 2005) kept unevaluated, for the two
// long inner products (scores and outputs), about 100 times faster than MPFR: its error,
// dot2_error(), is added to the bound as the oracle's own.
struct Dot2 {
  double hi = 0, lo = 0;
  void add(double x, double y) {
    const double product = x * y, product_error = std::fma(x, y, -product);
    const double sum = hi + product, z = sum - hi, sum_error = (hi - (sum - z)) + (product - z);
    hi = sum;
    lo += product_error + sum_error;
  }
  // hi + lo at 200 bits, exactly.
  void to(Exact& out) const {
    mpfr_set_d(raw(out), hi, MPFR_RNDN);
    mpfr_add_d(raw(out), raw(out), lo, MPFR_RNDN);
  }
};

// sum = x . y, x, y: [d]. A non-finite factor sends the whole sum through MPFR, so that inf
// and NaN follow IEEE rules exactly; `scratch` is scratch.
template <class T>
void dot(const T* x, const T* y, int64_t d, Exact& sum, Exact& scratch) {
  Dot2 dd;
  bool finite = true;
  for (int64_t k = 0; k < d; ++k) {
    finite &= std::isfinite(x[k]) && std::isfinite(y[k]);
    dd.add(double(x[k]), double(y[k]));
  }
  if (finite) return dd.to(sum);
  mpfr_set_zero(raw(sum), 1);
  for (int64_t k = 0; k < d; ++k) {
    mpfr_set_d(raw(scratch), double(x[k]), MPFR_RNDN);
    mpfr_mul_d(raw(scratch), raw(scratch), double(y[k]), MPFR_RNDN);
    mpfr_add(raw(sum), raw(sum), raw(scratch), MPFR_RNDN);
  }
}

// Rounds a non-negative exact value up to double, so that the bound only grows.
double up(const Exact& x) {
  const double d = x.convert_to<double>();
  return d < x ? std::nextafter(d, kInf) : d;
}

// A sum of n non-negative doubles, rounded to nearest, made an upper bound of the exact sum.
double inflate(double sum, int64_t n) { return sum * (1 + double(n + 2) * 0x1p-52); }

}  // namespace

template <class T>
ExactRow exact_row(const Problem<T>& p, int64_t b, int64_t h, int64_t i) {
  // Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], bias [B,H,Tq,Tk] in; row (b, h, i) out.
  const Shape& s = p.shape;
  const T* q_i = p.q + s.q_at(b, h, i);
  const T* bias_i = p.bias ? p.bias + s.scores_at(b, h, i) : nullptr;
  const Exact scale = p.scale != 0 ? Exact(p.scale) : 1 / sqrt(Exact(s.dk));
  const double scale_up = up(abs(scale));
  const Arithmetic arith = Arithmetic::of<T>();
  ExactRow row;
  RowFacts facts;
  facts.dk = s.dk;
  Exact qk, scratch;

  // Magnitudes for the bound and the range, from finite terms only (double, rounded up). Flushing
  // sums are taken in units of tiny, so that they cannot overflow: tiny |x| <= 4 for any finite x.
  auto finite_abs = [](T x) { return std::isfinite(x) ? std::fabs(double(x)) : 0.0; };
  double q_flush = 0, q_max = 0;
  for (int64_t k = 0; k < s.dk; ++k) {
    q_flush += arith.tiny * finite_abs(q_i[k]);
    q_max = std::max(q_max, finite_abs(q_i[k]));
  }
  q_flush = inflate(q_flush, s.dk);

  // Scores and row max: over permitted keys whose score is not -inf; NaN is sticky. The row is in
  // T's range when no permitted key's finite terms can overflow T, in any order, before or after scaling.
  row.max = -kInf;
  for (int64_t j = 0; j < s.Tk; ++j) {
    if (!key_permitted(p.masks, s, b, i, j)) continue;
    if (bias_i && bias_i[j] == -std::numeric_limits<T>::infinity()) continue;  // forbidden, its key unread
    const T* k_j = p.k + s.k_at(b, h, j);
    double qk_abs = 0, k_flush = 0, k_max = 0;
    for (int64_t k = 0; k < s.dk; ++k) {
      if (std::isfinite(q_i[k]) && std::isfinite(k_j[k])) qk_abs += std::fabs(double(q_i[k]) * double(k_j[k]));
      k_flush += arith.tiny * finite_abs(k_j[k]);
      k_max = std::max(k_max, finite_abs(k_j[k]));
    }
    qk_abs = inflate(qk_abs, s.dk);
    const double score_size = inflate(scale_up * qk_abs + (bias_i ? finite_abs(bias_i[j]) : 0), 2);
    // Every order must fit, with room for log2(e): q . k before scaling, c q or c k before the dot.
    facts.scores_in_range &=
        2 * std::max(1.0, scale_up) * std::max({qk_abs, score_size, q_max, k_max}) < arith.max_finite;

    dot(q_i, k_j, s.dk, qk, scratch);
    Exact s_ij = scale * qk;
    if (bias_i) s_ij += Exact(bias_i[j]);
    if (isinf(s_ij) && s_ij < 0) continue;
    row.keys.push_back(j);
    row.scores.push_back(s_ij);
    facts.score_size.push_back(score_size);
    facts.oracle_score_error.push_back(inflate(scale_up * dot2_error(s.dk, qk_abs), 1));
    // Flushing, in any order of scaling: a subnormal q_k or k_k read as 0, a scaled c q_k or c k_k
    // flushed (tiny, not c tiny, times the other factor), and each of the dk products and dk - 1
    // sums flushed: max(1, c) tiny (2 dk + sum |q| + sum |k|).
    facts.flush_error.push_back(
        inflate(std::max(1.0, scale_up) * (arith.tiny * double(2 * s.dk) + q_flush + inflate(k_flush, s.dk)), 3));
    if (isnan(s_ij) || s_ij > row.max || isnan(row.max)) row.max = isnan(row.max) ? row.max : s_ij;
  }
  const int64_t n = int64_t(row.keys.size());
  row.out.assign(size_t(s.dv), 0);
  row.bound.assign(size_t(s.dv), facts.scores_in_range ? 0 : kInf);
  row.lse_bound = facts.scores_in_range ? 0 : kInf;
  row.natural.assign(size_t(s.dv), 0);
  if (n == 0) {  // the empty-row policy: exact, so the bound is 0 (inside T's range)
    const bool zero = p.empty_rows == EmptyRows::zero;
    row.lse = zero ? -kInf : std::numeric_limits<double>::quiet_NaN();
    if (!zero) row.out.assign(size_t(s.dv), std::numeric_limits<long double>::quiet_NaN());
    return row;
  }

  // Exp and sum.
  Exact sum = 0;
  row.weights.resize(size_t(n));
  for (int64_t j = 0; j < n; ++j) {
    row.weights[j] = exp(row.scores[j] - row.max);
    sum += row.weights[j];
  }

  // Normalize; log-sum-exp.
  for (Exact& w : row.weights) w /= sum;
  row.lse = row.max + log(sum);

  // Weighted sum over the keys that carry weight, each 200-bit weight split into two doubles
  // (to 2^-106, exactly below 2^-969): w [2n] = (hi_0, lo_0, hi_1, ...), v [2n] at stride dv.
  const T* v_bh = p.v + s.v_at(b, h, 0);  // [Tk,dv] of head h's KV head
  std::vector<double> w_parts(size_t(2 * n));
  std::vector<T> v_c(size_t(2 * n));
  for (int64_t j = 0; j < n; ++j) {
    w_parts[2 * j] = row.weights[j].convert_to<double>();
    w_parts[2 * j + 1] = (row.weights[j] - w_parts[2 * j]).convert_to<double>();
  }
  Exact o;
  for (int64_t c = 0; c < s.dv; ++c) {
    bool finite = true;
    for (int64_t j = 0; j < n; ++j) {
      v_c[2 * j] = v_c[2 * j + 1] = v_bh[row.keys[j] * s.dv + c];
      finite &= std::isfinite(v_c[2 * j]);
    }
    if (finite) {
      Dot2 dd;
      for (int64_t t = 0; t < 2 * n; ++t) dd.add(w_parts[t], double(v_c[t]));
      dd.to(o);
    } else {  // inf or NaN values: 200-bit weights, so that p inf = inf even where p underflows double
      mpfr_set_zero(raw(o), 1);
      for (int64_t j = 0; j < n; ++j) {
        mpfr_mul_d(raw(scratch), raw(row.weights[j]), double(v_c[2 * j]), MPFR_RNDN);
        mpfr_add(raw(o), raw(o), raw(scratch), MPFR_RNDN);
      }
    }
    row.out[c] = o.convert_to<long double>();
  }

  // The bound of each output element (docs/error-bound.md). A row of special values (non-finite
  // maximum or sum) keeps bound 0 in range: the comparator matches its special values exactly.
  facts.finite_row = isfinite(row.max) && isfinite(sum);
  if (!facts.finite_row) return row;
  std::vector<double> v_abs(size_t(n * s.dv));
  for (int64_t j = 0; j < n; ++j) {
    facts.gap.push_back(up(row.max - row.scores[j]));
    facts.log_weight.push_back((row.scores[j] - row.lse).convert_to<double>());
    for (int64_t c = 0; c < s.dv; ++c) v_abs[size_t(j * s.dv + c)] = finite_abs(v_bh[row.keys[j] * s.dv + c]);
  }
  facts.max_abs = up(abs(row.max));
  facts.lse_abs = up(abs(row.lse));
  const LseBound lse = bound_row(facts, arith, v_abs, s.dv, row.bound.data(), row.natural.data());
  row.lse_bound = lse.bound;
  row.lse_natural = lse.natural;
  return row;
}

template <class T>
Reference reference(const Problem<T>& p) {
  // Q, K, V, bias in; out [B,H,Tq,dv] and lse [B,H,Tq] out.
  const Shape& s = p.shape;
  Reference ref;
  ref.out.name = "out";
  ref.out.dims = {s.B, s.H, s.Tq, s.dv};
  ref.lse.name = "lse";
  ref.lse.dims = {s.B, s.H, s.Tq};
  ref.lse.infinities_exact = true;
  for (ExactTensor* t : {&ref.out, &ref.lse}) {
    const size_t size = size_t(t == &ref.out ? s.out_size() : s.lse_size());
    t->exact.resize(size);
    t->bound.resize(size);
    t->natural.resize(size);
  }
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        const ExactRow row = exact_row(p, b, h, i);
        const size_t at = size_t(s.out_at(b, h, i)), n = size_t(s.lse_at(b, h, i));
        std::copy(row.out.begin(), row.out.end(), ref.out.exact.begin() + at);
        std::copy(row.bound.begin(), row.bound.end(), ref.out.bound.begin() + at);
        std::copy(row.natural.begin(), row.natural.end(), ref.out.natural.begin() + at);
        ref.lse.exact[n] = row.lse.convert_to<long double>();
        ref.lse.bound[n] = row.lse_bound;
        ref.lse.natural[n] = row.lse_natural;
      }
  return ref;
}

template ExactRow exact_row(const Problem<float>&, int64_t, int64_t, int64_t);
template ExactRow exact_row(const Problem<double>&, int64_t, int64_t, int64_t);
template Reference reference(const Problem<float>&);
template Reference reference(const Problem<double>&);

}  // namespace attncheck
