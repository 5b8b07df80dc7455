// The bound of docs/error-bound.md, term by term; the names follow that derivation.
#include "attncheck/bound.hpp"

#include "attncheck/precision.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attncheck {

template <class T>
Arithmetic Arithmetic::of() {
  using P = Precision<T>;
  return {P::u, P::smallest_normal, P::largest_finite, P::label};
}
template Arithmetic Arithmetic::of<float>();
template Arithmetic Arithmetic::of<double>();

namespace {

// Relative error of an exp (or exp2) in units of u: 2 ulps, i.e. glibc's expf and exp, CUDA's
// expf and exp2f. A kernel with a worse exp is a precision-loss finding, not a correct kernel.
constexpr double kExpUnits = 4;

// Roundings a score s_ij can pass through beyond its dk-term dot product: the scale's own rounding
// (or sqrt and division), applying it, adding the bias, folding log2(e) in for exp2.
constexpr int kScoreExtraRoundings = 5;

// How many times the roundings of an argument to exp can be charged against R_ij: the subtraction
// s - m, the telescoping rescales of an online softmax, and a rounded log2(e).
constexpr double kArgumentUnits = 3;

// The bound's own double arithmetic: a few hundred roundings at most per result, inflated away.
constexpr double kSelfInflation = 1 + 0x1p-30;

// gamma_k = k u / (1 - k u); no bound at all once k u reaches 1.
double gamma(double k, double u) { return k * u < 1 ? k * u / (1 - k * u) : std::numeric_limits<double>::infinity(); }

// log(expm1(x)) for x > 0, without overflow for large x.
double log_expm1(double x) { return x > 40 ? x : std::log(std::expm1(x)); }

// log(e^x + e^y), exact for -inf arguments.
double log_add(double x, double y) {
  const double top = std::max(x, y);
  return top == -std::numeric_limits<double>::infinity() ? top : top + std::log1p(std::exp(std::min(x, y) - top));
}

// log sum_j e^(x_j).
double log_add_all(const std::vector<double>& x) {
  double total = -std::numeric_limits<double>::infinity();
  for (double e : x) total = log_add(total, e);
  return total;
}

}  // namespace

double dot2_error(int64_t n, double size) {
  const double gamma_2n = 2 * double(n) * 0x1p-53 / (1 - 2 * double(n) * 0x1p-53);
  return gamma_2n * gamma_2n * size + double(n) * 0x1p-1074;
}

LseBound bound_row(const RowFacts& f, const Arithmetic& a, const std::vector<double>& v_abs, int64_t dv,
                   double* bound, double* natural) {
  // f: [n] per key; v_abs [n,dv]; bound and natural [dv].
  const int64_t n = int64_t(f.gap.size());
  const double inf = std::numeric_limits<double>::infinity();
  const double lambda = -std::log1p(-a.u);                  // |log(1 + delta)| of one rounding
  const double lambda_exp = -std::log1p(-kExpUnits * a.u);  // of one exp

  // E_j: score error, of which F_j comes from flushing and underflow. E_top: the largest score
  // error among keys that can be the computed maximum.
  std::vector<double> E(static_cast<size_t>(n)), F(E);
  int64_t argmax = 0;
  for (int64_t j = 0; j < n; ++j) {
    F[j] = f.flush_error[j] + 2 * a.tiny;
    // The oracle's own score error counts as the kernel's would: p_j is exact for scores within it.
    E[j] = gamma(double(f.dk + kScoreExtraRoundings), a.u) * f.score_size[j] + F[j] + f.oracle_score_error[j];
    if (f.gap[j] == 0 && E[j] > E[argmax]) argmax = j;
  }
  double E_top = 0;
  for (int64_t j = 0; j < n; ++j)
    if (f.gap[j] <= E[j] + E[argmax]) E_top = std::max(E_top, E[j]);

  // tau_j: log-error of key j's term in the normalizer (score, argument, exp, rescales, sum).
  const double per_term = lambda_exp + double(n - 1) * (lambda_exp + lambda) + double(n - 1) * lambda;
  std::vector<double> tau(static_cast<size_t>(n)), up(tau), down(tau);  // log(p_j e^{+-tau_j})
  for (int64_t j = 0; j < n; ++j) {
    const double R = f.gap[j] + E[j] + E_top;
    tau[j] = E[j] + kArgumentUnits * a.u * R + per_term;
    up[j] = f.log_weight[j] + tau[j];
    down[j] = f.log_weight[j] - tau[j];
  }

  // Others: log sum_{k != j} p_k e^{+-tau_k}, from prefix and suffix sums (no cancellation).
  auto others = [n, inf](const std::vector<double>& x) {
    std::vector<double> prefix(static_cast<size_t>(n + 1), -inf), suffix(prefix), result(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) prefix[j + 1] = log_add(prefix[j], x[j]);
    for (int64_t j = n - 1; j >= 0; --j) suffix[j] = log_add(suffix[j + 1], x[j]);
    for (int64_t j = 0; j < n; ++j) result[j] = log_add(prefix[j], suffix[j + 1]);
    return result;
  };
  const std::vector<double> others_up = others(up), others_down = others(down);

  // phi_j: |log(w_j / p_j)| <= rho + max(log(p_j + e^{tau_j} O+_j), -log(p_j + e^{-tau_j} O-_j)),
  // the score and exp errors of key j cancelling between its numerator and the normalizer.
  const double rho = double(4 * n - 1) * lambda + 2 * double(n) * double(n + 3) * a.tiny;
  // Per key: A_j = p_j expm1(phi_j), p_j, and p_j (u (1 + S_j + gap_j) + F_j + F_mean) for the
  // natural unit, F_j the score's flush terms of E_j and F_mean = sum_k p_k F_k: to first order a
  // score error d_j moves log w_j by d_j - sum_k p_k d_k. An A_j that underflows double loses less
  // than 2^-1074 |v|, which U covers many times over.
  std::vector<double> A(static_cast<size_t>(n)), p(A), p_natural(A);
  double F_mean = 0;
  for (int64_t j = 0; j < n; ++j) {
    const double upper = log_add(f.log_weight[j], tau[j] + others_up[j]);
    const double lower = log_add(f.log_weight[j], others_down[j] - tau[j]);
    A[j] = std::exp(f.log_weight[j] + log_expm1(rho + std::max(upper, -lower)));
    p[j] = std::exp(f.log_weight[j]);
    F_mean += p[j] * F[j];
  }
  for (int64_t j = 0; j < n; ++j) p_natural[j] = p[j] * (a.u * (1 + f.score_size[j] + f.gap[j]) + F[j] + F_mean);

  // B_c = sum_j A_j |v_jc| + U_c + the oracle's own error.
  for (int64_t c = 0; c < dv; ++c) {
    double B = 0, sum_pv = 0, natural_sum = 0, sum_v = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double v = v_abs[size_t(j * dv + c)];
      if (v == 0) continue;  // an infinite A_j times 0 is no error
      B += A[j] * v;
      sum_pv += p[j] * v;
      natural_sum += p_natural[j] * v;
      sum_v += v;
    }
    const double U = 2 * (double(n + 3) * a.tiny * sum_v + 2 * double(n) * a.tiny);
    // The oracle's own output error: weights split into two doubles (2^-106, or 2^-1074 below
    // 2^-969), Dot2 over 2n terms, and the long double it keeps.
    const double oracle = (0x1p-105 + 2 * std::numeric_limits<long double>::epsilon()) * sum_pv +
                          2 * dot2_error(2 * n, sum_pv) + 2 * 0x1p-1074 * sum_v;
    // Beyond n u = 0.1 the factor 2 in U no longer covers the amplification: the model ends there.
    const bool in_range = f.scores_in_range && 2 * sum_v < a.max_finite && double(n) * a.u < 0.1;
    bound[c] = !in_range ? inf : f.finite_row ? (B + U + oracle) * kSelfInflation : 0;
    natural[c] = f.finite_row ? natural_sum + U : 0;
  }

  // The log-sum-exp (docs/error-bound.md, "The log-sum-exp"). The computed normalizer is
  // l^ = e^(m - m^) l sum_j p_j e^(t_j), so m^ + log l^ = lse + log(sum_j p_j e^(t_j)): the
  // computed maximum cancels, and |log(sum_j p_j e^(t_j))| <= Lambda. Then the log's own error
  // (kExpUnits u relative, on |log l^| <= log n + E_top + Lambda) and three roundings of the
  // result's size (the final sum, and a base-2 log's two conversions), and the oracle's long double.
  double sum_pS = 0;  // to first order a score error d_j moves lse by sum_j p_j d_j
  for (int64_t j = 0; j < n; ++j) sum_pS += p[j] * f.score_size[j];
  const double Lambda = std::max(log_add_all(up), -log_add_all(down));
  const double log_l = std::log(double(n)) + E_top + Lambda;
  const double size = f.max_abs + E_top + log_l;
  const double oracle_lse = 2 * std::numeric_limits<long double>::epsilon() * f.lse_abs;
  LseBound lse;
  lse.bound = !f.scores_in_range ? inf : (Lambda + kExpUnits * a.u * log_l + 3 * a.u * size + oracle_lse) * kSelfInflation;
  lse.natural = a.u * (1 + f.max_abs + std::log(double(n)) + sum_pS) + F_mean;
  return lse;
}

}  // namespace attncheck
