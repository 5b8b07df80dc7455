// The bound of docs/error-bound.md, term by term; the names follow that derivation.
#include "attncheck/bound.hpp"

#include "attncheck/contract.hpp"
#include "attncheck/precision.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace attncheck {

template <class T>
Arithmetic Arithmetic::of() {
  using P = Precision<T>;
  return {P::u, P::smallest_normal, P::largest_finite, P::label};
}
template Arithmetic Arithmetic::of<float>();
template Arithmetic Arithmetic::of<double>();

Arithmetic Arithmetic::of(Format format) {
  if (format == Format::f64) return of<double>();
  Arithmetic a = of<float>();
  if (is_narrow(format))
    visit_narrow(format, [&](auto zero) {
      using P = Precision<decltype(zero)>;
      static const std::string label = std::string("stored in ") + P::label + "; computed in " + a.label;
      a.label = label.c_str();
      a.storage_u = P::u;
      a.storage_tiny = P::smallest_normal;
      a.storage_subnormal = P::smallest_normal * 2 * P::u;
      a.storage_max = P::largest_finite;
    });
  return a;
}

namespace {

// Roundings a score s_ij can pass through beyond its dk-term dot product: the scale's own rounding
// (or sqrt and division), applying it, adding the bias, folding log2(e) in for exp2.
constexpr int kScoreExtraRoundings = 5;

// How many times the roundings of an argument to exp can be charged against R_ij: the subtraction
// s - m, the telescoping rescales of an online softmax, and a rounded log2(e).
constexpr double kArgumentUnits = 3;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// log(expm1(x)) for x > 0, without overflow for large x.
double log_expm1(double x) { return x > 40 ? x : std::log(std::expm1(x)); }

// log(e^x + e^y), exact for infinite arguments (an infinite tau where a score's error bound
// overflows double: inf - inf would make it NaN, and the whole row's bound with it).
double log_add(double x, double y) {
  const double top = std::max(x, y);
  return std::isinf(top) ? top : top + std::log1p(std::exp(std::min(x, y) - top));
}

// upper, minus_lower and Lambda of bound_row, where every tau_j <= 30. As sum_k p_k = 1,
// p_j + e^{t_j} sum_{k!=j} p_k e^{t_k} = 1 + a_j O_j + (1 + a_j) sum_{k!=j} p_k a_k, a = expm1(t),
// O_j = sum_{k!=j} p_k: sums of terms of one sign, from prefix and suffix sums, so that nothing
// cancels. (The log-space form lost a small result to the rounding of terms near log p_j: a few
// percent of phi_j in double.) p_k a_k is taken in log space where p_k is below 2^-1000, and a term
// below 2^-1000 is widened by 2^-1072, all it may have lost; a rounded sum of n terms of one sign
// is widened by (n + 4) 2^-52.
double cancellation_linear(const RowFacts& f, const std::vector<double>& tau, std::vector<double>& upper,
                           std::vector<double>& minus_lower) {
  const int64_t n = int64_t(tau.size());
  const double widen = 1 + double(n + 4) * 0x1p-52;
  std::vector<double> a_up(static_cast<size_t>(n)), a_down(a_up), pa_up(a_up), pa_down(a_up);
  double sum_up = double(n) * 0x1p-1072, sum_down = -sum_up;
  int64_t top = 0;
  for (int64_t j = 0; j < n; ++j) {
    a_up[j] = std::expm1(tau[j]);
    a_down[j] = std::expm1(-tau[j]);
    const bool direct = f.weight[j] >= 0x1p-1000;
    pa_up[j] = direct ? f.weight[j] * a_up[j] : std::exp(f.log_weight[j] + std::log(a_up[j]));
    pa_down[j] = direct ? f.weight[j] * a_down[j] : -std::exp(f.log_weight[j] + std::log(-a_down[j]));
    sum_up += pa_up[j];
    sum_down += pa_down[j];
    if (f.log_weight[j] > f.log_weight[top]) top = j;
  }
  // sum_{k != j} x_k for every j, each term below 2^-1000 widened by 2^-1072 toward `sign`.
  auto others = [n](const std::vector<double>& x, double sign) {
    std::vector<double> prefix(static_cast<size_t>(n + 1), 0), suffix(prefix), result(static_cast<size_t>(n));
    auto term = [&](int64_t j) { return x[j] + (std::fabs(x[j]) < 0x1p-1000 ? sign * 0x1p-1072 : 0); };
    for (int64_t j = 0; j < n; ++j) prefix[j + 1] = prefix[j] + term(j);
    for (int64_t j = n - 1; j >= 0; --j) suffix[j] = suffix[j + 1] + term(j);
    for (int64_t j = 0; j < n; ++j) result[j] = prefix[j] + suffix[j + 1];
    return result;
  };
  const std::vector<double> O = others(f.weight, 1), B_up = others(pa_up, 1), B_down = others(pa_down, -1);
  for (int64_t j = 0; j < n; ++j) {
    upper[j] = std::log1p((a_up[j] * O[j] + (1 + a_up[j]) * B_up[j]) * widen);
    // p_j + e^{-tau_j} O-_j >= p_j: the second form keeps it finite where the first rounds to -1.
    const double lower_sum = (a_down[j] * O[j] + (1 + a_down[j]) * B_down[j]) * widen;
    minus_lower[j] = std::min(lower_sum > -1 ? -std::log1p(lower_sum) : kInfinity, -f.log_weight[j] + 4 * 0x1p-53);
  }
  sum_down *= widen;
  return std::max(std::log1p(sum_up * widen),
                  std::min(sum_down > -1 ? -std::log1p(sum_down) : kInfinity, -f.log_weight[top] + tau[top] + 4 * 0x1p-53));
}

// The same where some tau_j > 30, in log space (e^{tau} may overflow). A log_add(x, y) errs by at
// most 2u (|result| + 1), and moves by at most e^(y - result) times an error in y; since
// e^(r - R) |r| <= |R| + 1/e for r <= R, a chain of n of them ending at R errs by at most
// 2n u (|R| + 2). upper_j = log_add(log p_j, t), t = tau_j + others_j, errs by 2u (|upper_j| + 1)
// plus e^(t - upper_j) times t's error (the chain's and u |t|); likewise lower_j. Each is widened
// by that; the bound there is loose by e^30 anyway.
double cancellation_logs(const RowFacts& f, const std::vector<double>& tau, std::vector<double>& upper,
                         std::vector<double>& minus_lower) {
  const int64_t n = int64_t(tau.size());
  const double u = 0x1p-53;
  auto chain = [&](double R) { return R == -kInfinity ? 0 : 2 * double(n) * u * (std::fabs(R) + 2); };
  std::vector<double> up(static_cast<size_t>(n)), down(up);  // log(p_j e^{+-tau_j})
  for (int64_t j = 0; j < n; ++j) {
    up[j] = f.log_weight[j] + tau[j];
    down[j] = f.log_weight[j] - tau[j];
  }
  auto others = [n](const std::vector<double>& x) {  // log sum_{k != j} e^{x_k}
    std::vector<double> prefix(static_cast<size_t>(n + 1), -kInfinity), suffix(prefix), result(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) prefix[j + 1] = log_add(prefix[j], x[j]);
    for (int64_t j = n - 1; j >= 0; --j) suffix[j] = log_add(suffix[j + 1], x[j]);
    for (int64_t j = 0; j < n; ++j) result[j] = log_add(prefix[j], suffix[j + 1]);
    return result;
  };
  const std::vector<double> others_up = others(up), others_down = others(down);
  double all_up = -kInfinity, all_down = -kInfinity;
  for (int64_t j = 0; j < n; ++j) {
    const double t_high = tau[j] + others_up[j], t_low = others_down[j] - tau[j];
    const double high = log_add(f.log_weight[j], t_high), low = log_add(f.log_weight[j], t_low);
    auto error = [&](double result, double t, double others_j) {
      if (std::isinf(result)) return 0.0;  // an infinite bound needs no widening (and inf - inf is NaN)
      const double carried = t == -kInfinity ? 0 : std::exp(t - result) * (chain(others_j) + u * std::fabs(t));
      return 2 * u * (std::fabs(result) + 1) + carried;
    };
    upper[j] = high + error(high, t_high, others_up[j]);
    minus_lower[j] = -low + error(low, t_low, others_down[j]);
    all_up = log_add(all_up, up[j]);
    all_down = log_add(all_down, down[j]);
  }
  return std::max(all_up + chain(all_up), -all_down + chain(all_down));
}

// The score errors of a row's n keys (docs, step 1): E_j, of which F_j comes from flushing and
// underflow, and E_top, the largest score error among keys that can be the computed maximum.
struct ScoreErrors {
  std::vector<double> E, F;  // [n]
  double E_top = 0;
};
ScoreErrors score_errors(const RowFacts& f, const Arithmetic& a) {
  const int64_t n = int64_t(f.gap.size());
  ScoreErrors e;
  e.E.resize(size_t(n));
  e.F = e.E;
  int64_t argmax = 0;
  for (int64_t j = 0; j < n; ++j) {
    e.F[j] = f.flush_error[j] + 2 * a.tiny;
    // The oracle's own score error counts as the kernel's would: p_j is exact for scores within it.
    // A soft-cap s = cap tanh(t / cap) passes t's error on at most once (tanh' <= 1), and adds its
    // division's (cap u z sech^2 z <= 0.45 cap u), its tanh's and its multiply's (docs, step 1).
    const double softcap = f.softcap > 0 ? (kTanhUnits + 2) * a.u * f.softcap : 0;
    e.E[j] = gamma(double(f.dk + kScoreExtraRoundings), a.u) * f.score_size[j] + e.F[j] + f.oracle_score_error[j] + softcap;
    if (f.gap[j] == 0 && e.E[j] > e.E[argmax]) argmax = j;
  }
  for (int64_t j = 0; j < n; ++j)
    if (f.gap[j] <= e.E[j] + e.E[argmax]) e.E_top = std::max(e.E_top, e.E[j]);
  return e;
}

// tau_j [n]: the log-error of key j's term in the normalizer (score, argument, exp, rescales, sum).
std::vector<double> term_log_errors(const RowFacts& f, const Arithmetic& a, const ScoreErrors& e) {
  const int64_t n = int64_t(f.gap.size());
  const double lambda = -std::log1p(-a.u);                  // |log(1 + delta)| of one rounding
  const double lambda_exp = -std::log1p(-kExpUnits * a.u);  // of one exp
  const double per_term = lambda_exp + double(n - 1) * (lambda_exp + lambda) + double(n - 1) * lambda;
  std::vector<double> tau(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const double R = f.gap[j] + e.E[j] + e.E_top;
    tau[j] = e.E[j] + kArgumentUnits * a.u * R + per_term;
  }
  return tau;
}

// What each weight may err by (docs, steps 2 to 4), [n] each: A_j for the bound, p_natural for the
// natural unit, and with dropout the kept weights' exact values pw_j = p_j r.
struct WeightErrors {
  std::vector<double> A, p_natural, pw, A_undropped;  // A_undropped: A_j before the dropout rescale
  double F_mean = 0;                                  // sum_k p_k F_k
  double Lambda = 0;                                  // the log-sum-exp's log-error
  double r = 1;                                       // the dropout rescale 1 / (1 - p), rounded up
};
WeightErrors weight_errors(const RowFacts& f, const Arithmetic& a, const ScoreErrors& e) {
  const int64_t n = int64_t(f.gap.size());
  const double inf = std::numeric_limits<double>::infinity();
  const double lambda = -std::log1p(-a.u);
  const std::vector<double> tau = term_log_errors(f, a, e);
  // phi_j: |log(w_j / p_j)| <= rho + max(upper_j, minus_lower_j), upper_j = log(p_j + e^{tau_j} O+_j),
  // minus_lower_j = -log(p_j + e^{-tau_j} O-_j), O+-_j = sum_{k != j} p_k e^{+-tau_k}: the score and
  // exp errors of key j cancel between its numerator and the normalizer. Lambda, the log-sum-exp's,
  // is max(log sum_j p_j e^{tau_j}, -log sum_j p_j e^{-tau_j}).
  const double rho = double(4 * n - 1) * lambda + 2 * double(n) * double(n + 3) * a.tiny;
  const std::vector<double>& p = f.weight;
  std::vector<double> upper(static_cast<size_t>(n)), minus_lower(upper);
  WeightErrors w;
  if (*std::max_element(tau.begin(), tau.end()) <= 30)
    w.Lambda = cancellation_linear(f, tau, upper, minus_lower);
  else
    w.Lambda = cancellation_logs(f, tau, upper, minus_lower);

  // Per key: A_j = p_j expm1(phi_j) (in log space: p_j may underflow double while A_j does not),
  // p_j, and p_j (u (1 + S_j + gap_j) + F_j + F_mean) for the natural unit, F_j the score's flush
  // terms of E_j and F_mean = sum_k p_k F_k: to first order a score error d_j moves log w_j by
  // d_j - sum_k p_k d_k. An A_j that underflows double loses less than 2^-1074 |v|, which U covers.
  w.A.resize(size_t(n));
  w.p_natural = w.A;
  for (int64_t j = 0; j < n; ++j) {
    // exp of a sum whose parts are rounded: widened by their ulps, so that A_j only grows.
    const double log_phi = log_expm1(rho + std::max(upper[j], minus_lower[j]));
    w.A[j] = std::exp(f.log_weight[j] + log_phi + 0x1p-51 * (std::fabs(f.log_weight[j]) + std::fabs(log_phi) + 1));
    w.F_mean += p[j] * e.F[j];
  }
  for (int64_t j = 0; j < n; ++j) w.p_natural[j] = p[j] * (a.u * (1 + f.score_size[j] + f.gap[j]) + e.F[j] + w.F_mean);
  w.pw = p;
  w.A_undropped = w.A;
  // Dropout: key j's term is w_j r^ rounded, r^ the kernel's 1 / (1 - p) within gamma_k, k =
  // dropout_roundings(p): |w_j r^ (1 + theta) - p_j r| <= r (A_j (1 + g) + g p_j). Every term
  // scales by r, and so do U and the oracle's own error; dropped keys come with |v| = 0.
  // r rounded up past its two roundings (1 - p, the division); no bound once gamma_k has none.
  if (f.dropout_p > 0) {
    w.r = dropout_rescale(f.dropout_p) * (1 + 0x1p-51);
    const double g = gamma(dropout_roundings(f.dropout_p), a.u);
    for (int64_t j = 0; j < n; ++j) {
      w.A[j] = std::isinf(g) ? inf : w.r * (w.A[j] * (1 + g) + g * p[j]) * (1 + 0x1p-51);
      w.p_natural[j] = std::isinf(g) ? inf : w.r * (w.p_natural[j] + g * p[j]);
      w.pw[j] = w.r * p[j];
    }
  }
  return w;
}

// Column c's loss to a 2-byte format (docs/error-bound.md, "Low precision"): the weights rounded
// to it before the P V product, their normalizer summed from them or not, the output rounded to it.
// W bounds sum_j w_j |v_jc| of the computed weights; a weight below twice the format's smallest
// normal may underflow, by half a subnormal, in the numerator and in the normalizer (l >= 1). With
// dropout the rounded weight is the one before its rescale, whose loss the rescale multiplies by r.
// v_abs [n,dv]. Clears in_range when the column overflows the format.
struct Stored {
  double bound = 0, natural = 0;
};
Stored stored_in_format(const RowFacts& f, const Arithmetic& a, const WeightErrors& w, const std::vector<double>& v_abs,
                        int64_t dv, int64_t c, double sum_pv, bool& in_range) {
  const int64_t n = int64_t(f.gap.size());
  const std::vector<double>& p = f.weight;
  double W = 0, underflow_v = 0, underflow_l = 0;
  for (int64_t j = 0; j < n; ++j) {
    const double v = v_abs[size_t(j * dv + c)];
    W += (w.pw[j] + w.A[j]) * v;
    if (p[j] + w.A_undropped[j] < 2 * a.storage_tiny) {
      underflow_v += w.r * a.storage_subnormal * v;
      underflow_l += a.storage_subnormal;
    }
  }
  // With dropout, the rescale 1 / (1 - p) may be held in the format (PyTorch multiplies by it as
  // a tensor of the input's dtype) and the product rounded to it: two more roundings.
  const double weights = (f.dropout_p > 0 ? 4 : 2) * a.storage_u * W + underflow_v + underflow_l * W;
  const double output = a.storage_u * (W + weights) + a.storage_subnormal / 2;
  in_range &= (W + weights) * (1 + a.storage_u) < a.storage_max;
  return {(weights + output) * (1 + 4 * a.storage_u), 3 * a.storage_u * sum_pv + underflow_v + a.storage_subnormal / 2};
}

// Each output element's bound and natural unit [dv]: B_c = sum_j A_j |v_jc| + U_c + the oracle's
// own error (+ a 2-byte format's loss). v_abs [n,dv].
void output_bounds(const RowFacts& f, const Arithmetic& a, const WeightErrors& w, const std::vector<double>& v_abs, int64_t dv,
                   double* bound, double* natural) {
  const int64_t n = int64_t(f.gap.size());
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < dv; ++c) {
    double B = 0, sum_pv = 0, natural_sum = 0, sum_v = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double v = v_abs[size_t(j * dv + c)];
      if (v == 0) continue;  // an infinite A_j times 0 is no error
      B += w.A[j] * v;
      sum_pv += w.pw[j] * v;
      natural_sum += w.p_natural[j] * v;
      sum_v += v;
    }
    const double U = 2 * w.r * (double(n + 3) * a.tiny * sum_v + 2 * double(n) * a.tiny);
    // The oracle's own output error: its normalizer's, its weighted sum's, and the terms its exp
    // dropped (below 2^-1074 |v| each).
    const double oracle = (f.oracle_weight_error + f.oracle_output_error) * sum_pv + 2 * w.r * 0x1p-1074 * sum_v;
    // Beyond n u = 0.1 the factor 2 in U no longer covers the amplification: the model ends there.
    bool in_range = f.scores_in_range && 2 * w.r * sum_v < a.max_finite && double(n) * a.u < 0.1;
    const Stored stored = a.storage_u > 0 ? stored_in_format(f, a, w, v_abs, dv, c, sum_pv, in_range) : Stored{};
    bound[c] = !in_range ? inf : f.finite_row ? (B + U + oracle + stored.bound) * kSelfInflation : 0;
    natural[c] = f.finite_row ? natural_sum + U + stored.natural : 0;
  }
}

// The log-sum-exp (docs/error-bound.md, "The log-sum-exp"). The computed normalizer is
// l^ = e^(m - m^) l sum_j p_j e^(t_j), so m^ + log l^ = lse + log(sum_j p_j e^(t_j)): the computed
// maximum cancels, and |log(sum_j p_j e^(t_j))| <= Lambda. Then the log's own error (kExpUnits u
// relative, on |log l^| <= log n + E_top + Lambda) and three roundings of the result's size (the
// final sum, and a base-2 log's two conversions), and the oracle's long double.
LseBound lse_bound(const RowFacts& f, const Arithmetic& a, const ScoreErrors& e, const WeightErrors& w) {
  const int64_t n = int64_t(f.gap.size());
  const double inf = std::numeric_limits<double>::infinity();
  double sum_pS = 0;  // to first order a score error d_j moves lse by sum_j p_j d_j
  for (int64_t j = 0; j < n; ++j) sum_pS += f.weight[j] * f.score_size[j];
  const double log_l = std::log(double(n)) + e.E_top + w.Lambda;
  const double size = f.max_abs + e.E_top + log_l;
  const double oracle_lse = f.oracle_weight_error + 2 * std::numeric_limits<long double>::epsilon() * f.lse_abs;
  LseBound lse;
  lse.bound = !f.scores_in_range ? inf : (w.Lambda + kExpUnits * a.u * log_l + 3 * a.u * size + oracle_lse) * kSelfInflation;
  lse.natural = a.u * (1 + f.max_abs + std::log(double(n)) + sum_pS) + w.F_mean;
  return lse;
}

}  // namespace

LseBound bound_row(const RowFacts& f, const Arithmetic& a, const std::vector<double>& v_abs, int64_t dv, double* bound,
                   double* natural, std::vector<double>* score_error, std::vector<double>* weight_error) {
  // f: [n] per key; v_abs [n,dv]; bound and natural [dv].
  const ScoreErrors e = score_errors(f, a);
  const WeightErrors w = weight_errors(f, a, e);
  if (score_error) *score_error = e.E;
  if (weight_error) *weight_error = w.A_undropped;
  output_bounds(f, a, w, v_abs, dv, bound, natural);
  return lse_bound(f, a, e, w);
}

}  // namespace attncheck
