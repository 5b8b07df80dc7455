// The bound of docs/error-bound.md, term by term; the names follow that derivation.
#include "attncheck/bound.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attncheck {

template <class T>
Arithmetic Arithmetic::of() {
  return {std::numeric_limits<T>::epsilon() / 2, double(std::numeric_limits<T>::min()),
          double(std::numeric_limits<T>::max())};
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

double gamma(double k, double u) { return k * u / (1 - k * u); }

// log(expm1(x)) for x > 0, without overflow for large x.
double log_expm1(double x) { return x > 40 ? x : std::log(std::expm1(x)); }

}  // namespace

void bound_row(const RowFacts& f, const Arithmetic& a, const std::vector<double>& v_abs, int64_t dv,
               double* bound, double* natural) {
  // f: [n] per key; v_abs [n,dv]; bound and natural [dv].
  const int64_t n = int64_t(f.gap.size());
  const double inf = std::numeric_limits<double>::infinity();
  const double lambda = -std::log1p(-a.u);                     // |log(1 + delta)| of one rounding
  const double lambda_exp = -std::log1p(-kExpUnits * a.u);     // of one exp


  // E_ij: score error. E_i = max_j E_ij.
  std::vector<double> E(size_t(n), 0.0);
  double E_max = 0;
  for (int64_t j = 0; j < n; ++j) {
    E[j] = gamma(double(f.dk + kScoreExtraRoundings), a.u) * f.score_size[j] + a.tiny * f.flush_size[j] + 2 * a.tiny;
    E_max = std::max(E_max, E[j]);
  }

  // tau_ij: log-error of key j's term in the normalizer; D_i: log-error of the normalizer itself.
  const double per_term = lambda_exp + double(n - 1) * (lambda_exp + lambda) + double(n - 1) * lambda;
  std::vector<double> tau(static_cast<size_t>(n));
  double D_terms_max = -inf;
  for (int64_t j = 0; j < n; ++j) {
    const double R = f.gap[j] + 2 * E_max;
    tau[j] = E[j] + kArgumentUnits * a.u * R + per_term;
    D_terms_max = std::max(D_terms_max, f.log_weight[j] + tau[j]);
  }
  double D_sum = 0;
  for (int64_t j = 0; j < n; ++j) D_sum += std::exp(f.log_weight[j] + tau[j] - D_terms_max);
  const double D = D_terms_max + std::log(D_sum) + 2 * double(n) * double(n + 3) * a.tiny;

  // B_ic = sum_j p_ij |v_jc| expm1(phi_ij) + U_ic, phi_ij = tau_ij + 3 lambda + D_i.
  for (int64_t c = 0; c < dv; ++c) {
    double B = 0, sum_pv = 0, sum_v = 0;  // sum_pv: sum_j p_ij |v_jc| (1 + S_ij + gap_ij)
    for (int64_t j = 0; j < n; ++j) {
      const double v = v_abs[size_t(j * dv + c)];
      const double phi = tau[j] + 3 * lambda + D;
      if (v != 0) B += std::exp(f.log_weight[j] + log_expm1(phi) + std::log(v));
      sum_pv += std::exp(f.log_weight[j]) * v * (1 + f.score_size[j] + f.gap[j]);
      sum_v += v;
    }
    const double U = 2 * (double(n + 3) * a.tiny * sum_v + 2 * double(n) * a.tiny);
    const bool in_range = f.scores_in_range && 2 * sum_v < a.max_finite;
    bound[c] = !in_range ? inf : f.finite_row ? (B + U) * kSelfInflation : 0;
    natural[c] = f.finite_row ? a.u * sum_pv + U : 0;
  }
}

}  // namespace attncheck
