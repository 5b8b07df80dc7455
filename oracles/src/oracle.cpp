#include "attncheck/oracle.hpp"

#include <cmath>
#include <limits>

#include "attncheck/bound.hpp"

namespace attncheck {
namespace {

// The oracle's own reading of the masks, written apart from impl/'s on purpose (contract.md, Masks).
bool key_permitted(const Masks& masks, const Shape& s, int64_t b, int64_t i, int64_t j) {
  if (masks.allow && masks.allow[(b * s.Tq + i) * s.Tk + j] == 0) return false;
  if (masks.key_lengths && j >= masks.key_lengths[b]) return false;
  if (masks.causal == Causal::upper_left) return j - i <= 0;
  if (masks.causal == Causal::lower_right) return j - i <= s.Tk - s.Tq;
  return true;
}

// x . y exactly (to 2^-200), x, y: [d]. A float product is exact in double (24 + 24 bits, and
// its exponent range squared fits), which is faster; a double product is formed in MPFR.
template <class T>
Exact exact_dot(const T* x, const T* y, int64_t d) {
  Exact sum = 0;
  for (int64_t k = 0; k < d; ++k) {
    if constexpr (sizeof(T) == sizeof(float))
      sum += double(x[k]) * double(y[k]);
    else
      sum += Exact(x[k]) * Exact(y[k]);
  }
  return sum;
}

// Rounds a non-negative exact value up to double, so that the bound only grows.
double up(const Exact& x) {
  const double d = x.convert_to<double>();
  return d < x ? std::nextafter(d, std::numeric_limits<double>::infinity()) : d;
}

}  // namespace

template <class T>
ExactRow exact_row(const Problem<T>& p, int64_t b, int64_t h, int64_t i) {
  // Q [B,H,Tq,dk], K [B,H,Tk,dk], V [B,H,Tk,dv], bias [B,H,Tq,Tk] in; row (b, h, i) out.
  const Shape& s = p.shape;
  const int64_t bh = b * s.H + h;
  const T* q_i = p.q + (bh * s.Tq + i) * s.dk;
  const Exact scale = p.scale != 0 ? Exact(p.scale) : 1 / sqrt(Exact(s.dk));
  ExactRow row;

  // Scores and row max: over permitted keys whose score is not -inf; NaN is sticky. The row is in
  // T's range when no permitted key's finite terms can overflow T, in any order, before or after scaling.
  row.max = -std::numeric_limits<double>::infinity();
  const double range_factor = 2 * std::max(1.0, std::fabs(effective_scale(s, p.scale)));
  bool scores_in_range = true;
  for (int64_t j = 0; j < s.Tk; ++j) {
    if (!key_permitted(p.masks, s, b, i, j)) continue;
    const T* k_j = p.k + (bh * s.Tk + j) * s.dk;
    double size = 0;
    for (int64_t k = 0; k < s.dk; ++k)
      if (std::isfinite(q_i[k]) && std::isfinite(k_j[k])) size += std::fabs(double(q_i[k]) * double(k_j[k]));
    if (p.bias && std::isfinite(p.bias[(bh * s.Tq + i) * s.Tk + j])) size += std::fabs(p.bias[(bh * s.Tq + i) * s.Tk + j]);
    scores_in_range &= range_factor * size < double(std::numeric_limits<T>::max());
    Exact s_ij = scale * exact_dot(q_i, k_j, s.dk);
    if (p.bias) s_ij += Exact(p.bias[(bh * s.Tq + i) * s.Tk + j]);
    if (isinf(s_ij) && s_ij < 0) continue;
    row.keys.push_back(j);
    row.scores.push_back(s_ij);
    if (isnan(s_ij) || s_ij > row.max || isnan(row.max)) row.max = isnan(row.max) ? row.max : s_ij;
  }
  const int64_t n = int64_t(row.keys.size());
  const Arithmetic arith = Arithmetic::of<T>();
  row.out.assign(size_t(s.dv), 0);
  row.bound.assign(size_t(s.dv), 0);
  row.natural.assign(size_t(s.dv), 0);
  if (n == 0) {  // the empty-row policy: exact, so the bound is 0 (inside T's range)
    const bool zero = p.empty_rows == EmptyRows::zero;
    if (!scores_in_range) row.bound.assign(size_t(s.dv), std::numeric_limits<double>::infinity());
    row.lse = zero ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
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

  // Weighted sum over the keys that carry weight.
  const T* v_bh = p.v + bh * s.Tk * s.dv;
  for (int64_t c = 0; c < s.dv; ++c) {
    Exact o = 0;
    for (int64_t j = 0; j < n; ++j) o += row.weights[j] * Exact(v_bh[row.keys[j] * s.dv + c]);
    row.out[c] = o.convert_to<long double>();
  }

  // The bound of each output element (docs/error-bound.md). Range is judged on finite magnitudes
  // only: non-finite inputs give special values, which the comparator matches exactly.
  RowFacts facts;
  facts.dk = s.dk;
  facts.finite_row = isfinite(row.max) && isfinite(sum);
  facts.scores_in_range = scores_in_range;
  auto finite_abs = [](const Exact& x) { return isfinite(x) ? abs(x) : Exact(0); };
  std::vector<double> v_abs(size_t(n * s.dv));
  Exact q_abs_sum = 0;
  for (int64_t k = 0; k < s.dk; ++k) q_abs_sum += finite_abs(Exact(q_i[k]));
  for (int64_t j = 0; j < n; ++j) {
    const T* k_j = p.k + (bh * s.Tk + row.keys[j]) * s.dk;
    Exact size = 0, k_abs_sum = 0;
    for (int64_t k = 0; k < s.dk; ++k) {
      size += finite_abs(Exact(q_i[k]) * Exact(k_j[k]));
      k_abs_sum += finite_abs(Exact(k_j[k]));
    }
    size = abs(scale) * size;
    if (p.bias) size += finite_abs(Exact(p.bias[(bh * s.Tq + i) * s.Tk + row.keys[j]]));
    facts.score_size.push_back(up(size));
    facts.flush_size.push_back(up(abs(scale) * (Exact(s.dk) + q_abs_sum + k_abs_sum)));
    facts.gap.push_back(facts.finite_row ? up(row.max - row.scores[j]) : 0);
    facts.log_weight.push_back(facts.finite_row ? log(row.weights[j]).convert_to<double>() : 0);
    for (int64_t c = 0; c < s.dv; ++c)
      v_abs[size_t(j * s.dv + c)] = finite_abs(Exact(v_bh[row.keys[j] * s.dv + c])).template convert_to<double>();
  }
  bound_row(facts, arith, v_abs, s.dv, row.bound.data(), row.natural.data());
  return row;
}

template <class T>
Reference reference(const Problem<T>& p) {
  // Q, K, V, bias in; exact, bound and natural [B,H,Tq,dv] out.
  const Shape& s = p.shape;
  Reference ref;
  const size_t size = size_t(s.B * s.H * s.Tq * s.dv);
  ref.exact.resize(size);
  ref.bound.resize(size);
  ref.natural.resize(size);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        const ExactRow row = exact_row(p, b, h, i);
        const size_t at = size_t(((b * s.H + h) * s.Tq + i) * s.dv);
        std::copy(row.out.begin(), row.out.end(), ref.exact.begin() + at);
        std::copy(row.bound.begin(), row.bound.end(), ref.bound.begin() + at);
        std::copy(row.natural.begin(), row.natural.end(), ref.natural.begin() + at);
      }
  return ref;
}

template ExactRow exact_row(const Problem<float>&, int64_t, int64_t, int64_t);
template ExactRow exact_row(const Problem<double>&, int64_t, int64_t, int64_t);
template Reference reference(const Problem<float>&);
template Reference reference(const Problem<double>&);

}  // namespace attncheck
