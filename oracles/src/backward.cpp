// The backward's exact values and bound (docs/error-bound.md, "Gradients"); the names follow that
// derivation. The forward it differentiates, per row i and permitted key j:
//   s_ij = cap tanh(c q_i . k_j / cap) + bias_ij,   p_ij = exp(s_ij - lse_i),   o_i = sum_j p_ij v_j
// and with dO the output's gradient:
//   dV_j = sum_i p_ij dO_i,  dP_ij = dO_i . v_j,  D_i = sum_j p_ij dP_ij,  dS_ij = p_ij (dP_ij - D_i),
//   dT_ij = dS_ij (1 - tanh^2),  dQ_i = c sum_j dT_ij k_j,  dK_j = c sum_i dT_ij q_i
// (dK and dV summed over the query heads that share a KV head).
#include "attncheck/backward.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attncheck/bound.hpp"

namespace attncheck {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr long double kNaN = std::numeric_limits<long double>::quiet_NaN();

// The oracle's long double arithmetic: each exact value is a sum of at most a few thousand rounded
// long double terms, each within 2^-63 of its size; charged as 2^-62 per term of the magnitudes.
constexpr double kOracleUnit = 0x1p-62;

// The errors a correct backward may make in the quantities of one row, for the bound (rigorous)
// or for the precision gate (first order, unit constants): both are built by the same code.
struct Model {
  bool rigorous;
  double u, tiny;
  double g(double k) const { return rigorous ? gamma(k, u) : u; }  // k roundings
};

// A flushed product: x y with a factor read as 0 (denormals-are-zero) or the product flushed to 0
// (flush-to-zero) loses at most tiny (|x| + |y| + 1); a flushed sum, tiny. Summed over n products,
// with the factor 2 of the forward's U for their later amplification (docs, step 5). Part of the
// natural unit too, as in the forward: flushing is no loss of precision.
double flushed(double tiny, double factor_sum, double n) { return 2 * tiny * (factor_sum + 2 * n + 3); }

// The sums over the rows that see one key: its dK and dV terms, kept per model, and the sums of
// the factors of its products, for flushing.
struct KeyTerms {
  std::vector<double> dk_error[2], dk_size[2], dv_error[2], dv_size[2];  // [dk], [dk], [dv], [dv]
  std::vector<double> dk_factors, dv_factors;                            // [dk], [dv]
  int64_t rows = 0;
  bool unchecked = false;
};

}  // namespace

template <class T>
GradReference<T> reference_backward(const Problem<T>& p, const T* dout, bool own_forward) {
  // Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], dout [B,H,Tq,dv] in; the reference out.
  const Shape& s = p.shape;
  const Arithmetic a = Arithmetic::of(p.format);
  const bool narrow = a.storage_u > 0;
  const std::vector<ExactRow> rows = exact_rows(p);
  const long double c = p.scale != 0 ? (long double)p.scale : 1 / std::sqrt((long double)s.dk);
  const double c_abs = double(std::fabs(c)) * (1 + 0x1p-50);
  const Model models[2] = {{true, a.u, a.tiny}, {false, a.u, a.tiny}};

  GradReference<T> ref;
  const std::pair<ExactTensor*, std::pair<const char*, std::vector<int64_t>>> tensors[] = {
      {&ref.dq, {"dq", {s.B, s.H, s.Tq, s.dk}}},
      {&ref.dk, {"dk", {s.B, s.kv_heads(), s.Tk, s.dk}}},
      {&ref.dv, {"dv", {s.B, s.kv_heads(), s.Tk, s.dv}}}};
  for (const auto& [t, named] : tensors) {
    t->name = named.first;
    t->dims = named.second;
    t->row_size = named.second[3];
    t->format = p.format;
    const size_t size = size_t(named.second[0] * named.second[1] * named.second[2] * named.second[3]);
    t->exact.assign(size, 0);
    t->bound.assign(size, 0);
    t->natural.assign(size, 0);
  }

  // The inputs a backward gets: the exact out and lse rounded to their formats (out to a 2-byte
  // format through double: within 2^-52 |o| of a single rounding, charged below).
  ref.out.resize(size_t(s.out_size()));
  ref.lse.resize(size_t(s.lse_size()));
  for (int64_t r = 0; r < s.lse_size(); ++r) {
    const ExactRow& row = rows[size_t(r)];
    ref.lse[size_t(r)] = T(row.lse);
    for (int64_t col = 0; col < s.dv; ++col)
      ref.out[size_t(r * s.dv + col)] = narrow ? T(round_to(p.format, double(row.out[size_t(col)]))) : T(row.out[size_t(col)]);
  }
  // |given out - out| <= u_out |o| + half the format's smallest subnormal.
  const double u_out = (narrow ? a.storage_u : a.u) + 0x1p-52;
  const double half_subnormal_out = narrow ? a.storage_subnormal / 2 : a.tiny * a.u;

  std::vector<KeyTerms> keys(size_t(s.B * s.kv_heads() * s.Tk));
  for (KeyTerms& key : keys)
    for (int m = 0; m < 2; ++m) {
      key.dk_error[m].assign(size_t(s.dk), 0);
      key.dk_size[m].assign(size_t(s.dk), 0);
      key.dv_error[m].assign(size_t(s.dv), 0);
      key.dv_size[m].assign(size_t(s.dv), 0);
    }
  for (KeyTerms& key : keys) {
    key.dk_factors.assign(size_t(s.dk), 0);
    key.dv_factors.assign(size_t(s.dv), 0);
  }
  auto key_of = [&](int64_t b, int64_t h, int64_t j) -> KeyTerms& {
    return keys[size_t((b * s.kv_heads() + s.kv_head(h)) * s.Tk + j)];
  };

  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        const ExactRow& row = rows[size_t(s.lse_at(b, h, i))];
        const int64_t n = int64_t(row.keys.size());
        const T* q_i = p.q + s.q_at(b, h, i);
        const T* dO = dout + s.out_at(b, h, i);
        long double* dq_exact = ref.dq.exact.data() + s.q_at(b, h, i);
        double* dq_bound = ref.dq.bound.data() + s.q_at(b, h, i);
        double* dq_natural = ref.dq.natural.data() + s.q_at(b, h, i);

        // A row the bound cannot follow: a special forward row (a NaN or +inf score), one outside
        // T's range, or a non-finite dO or q, or k or v of a key its masks permit (a key whose
        // score is -inf carries no weight, but 0 times its inf is NaN wherever a kernel does not
        // skip it). Its dQ and its keys' dK and dV are not checked. A row with no permitted key
        // reads nothing: its dQ is 0, exactly.
        const T* bias_i = p.bias ? p.bias + s.scores_at(b, h, i) : nullptr;
        bool finite = true;
        std::vector<int64_t> permitted;  // the keys the row reads, weightless ones included
        for (int64_t j = 0; j < s.Tk; ++j) {
          if (!permits(p.masks, s, b, i, j) || (bias_i && bias_i[j] == -std::numeric_limits<T>::infinity())) continue;
          permitted.push_back(j);
          const T* k_j = p.k + s.k_at(b, h, j);
          const T* v_j = p.v + s.v_at(b, h, j);
          for (int64_t k = 0; k < s.dk; ++k) finite &= std::isfinite(double(k_j[k]));
          for (int64_t col = 0; col < s.dv; ++col) finite &= std::isfinite(double(v_j[col]));
        }
        if (permitted.empty()) continue;
        finite &= n == 0 || (std::isfinite(row.weights[0]) && std::isfinite(row.lse));
        for (double x : row.bound) finite &= std::isfinite(x);
        for (int64_t col = 0; col < s.dv; ++col) finite &= std::isfinite(double(dO[col]));
        for (int64_t k = 0; k < s.dk; ++k) finite &= std::isfinite(double(q_i[k]));
        if (!finite) {
          std::fill_n(dq_exact, s.dk, kNaN);
          std::fill_n(dq_bound, s.dk, kInf);
          for (int64_t j : permitted) key_of(b, h, j).unchecked = true;
          continue;
        }
        if (n == 0) continue;  // every permitted score -inf: no weight anywhere, dQ 0

        // Pass 1: dP_t = dO_i . v_j and its size, D_i = sum_t p_t dP_t, dS_t, dT_t; and the
        // sizes the bound needs: sum |dO||v_j|, sum |dO||o_i|, sum |dO|, sum |v_j|.
        std::vector<long double> dP(static_cast<size_t>(n)), dS(dP), dT(dP);
        std::vector<double> dP_size(static_cast<size_t>(n)), v_sum(dP_size);
        double dO_sum = 0, dO_o_size = 0, o_sum = 0;
        for (int64_t col = 0; col < s.dv; ++col) {
          dO_sum += std::fabs(double(dO[col]));
          dO_o_size += std::fabs(double(dO[col])) * double(std::fabs(row.out[size_t(col)]));
          o_sum += double(std::fabs(row.out[size_t(col)]));
        }
        dO_sum = inflate(dO_sum, s.dv);
        dO_o_size = inflate(dO_o_size, 2 * s.dv);
        o_sum = inflate(o_sum, s.dv);
        for (int64_t t = 0; t < n; ++t) {
          const T* v_j = p.v + s.v_at(b, h, row.keys[size_t(t)]);
          long double dP_t = 0;
          double size = 0, sum_v = 0;
          for (int64_t col = 0; col < s.dv; ++col) {
            dP_t += (long double)dO[col] * (long double)v_j[col];
            size += std::fabs(double(dO[col]) * double(v_j[col]));
            sum_v += std::fabs(double(v_j[col]));
          }
          dP[size_t(t)] = dP_t;
          dP_size[size_t(t)] = inflate(size, s.dv);
          v_sum[size_t(t)] = inflate(sum_v, s.dv);
        }
        // Sums a correct kernel forms must fit its arithmetic, in any order.
        const double room = a.max_finite / 8;
        bool in_range = dO_o_size < room;
        for (double size : dP_size) in_range &= size < room;
        if (!in_range) {
          std::fill_n(dq_bound, s.dk, kInf);
          for (int64_t j : permitted) key_of(b, h, j).unchecked = true;
        }
        // dP_t - D without its cancellation: as sum_k p_k = 1, dP_t - D = sum_{k != t} p_k (dP_t - dP_k)
        // = O_t dP_t - W_t, O_t = sum_{k != t} p_k and W_t = sum_{k != t} p_k dP_k from prefix and
        // suffix sums (where p_t is 1 - 5.6e-42, 1 - p_t is O_t, which long double keeps and p_t does
        // not). Its own error: 2^-62 (n + dv + 4) of O_t |dP_t| + sum_{k != t} p_k |dP_k| (charged).
        std::vector<long double> others(static_cast<size_t>(n)), weighted(others);
        std::vector<double> weighted_size(static_cast<size_t>(n));
        {
          long double p_before = 0, w_before = 0;
          double size_before = 0;
          for (int64_t t = 0; t < n; ++t) {
            others[size_t(t)] = p_before;
            weighted[size_t(t)] = w_before;
            weighted_size[size_t(t)] = size_before;
            p_before += row.weights[size_t(t)];
            w_before += row.weights[size_t(t)] * dP[size_t(t)];
            size_before += double(row.weights[size_t(t)] * std::fabs(dP[size_t(t)]));
          }
          long double p_after = 0, w_after = 0;
          double size_after = 0;
          for (int64_t t = n - 1; t >= 0; --t) {
            others[size_t(t)] += p_after;
            weighted[size_t(t)] += w_after;
            weighted_size[size_t(t)] = inflate(weighted_size[size_t(t)] + size_after, n);
            p_after += row.weights[size_t(t)];
            w_after += row.weights[size_t(t)] * dP[size_t(t)];
            size_after += double(row.weights[size_t(t)] * std::fabs(dP[size_t(t)]));
          }
        }
        std::vector<double> own_dS(static_cast<size_t>(n));  // the oracle's error in dS_t
        for (int64_t t = 0; t < n; ++t) {
          const long double spread = others[size_t(t)] * dP[size_t(t)] - weighted[size_t(t)];
          dS[size_t(t)] = row.weights[size_t(t)] * spread;
          dT[size_t(t)] = row.cap_slope.empty() ? dS[size_t(t)] : dS[size_t(t)] * row.cap_slope[size_t(t)];
          own_dS[size_t(t)] =
              kOracleUnit * double(n + s.dv + 4) * double(row.weights[size_t(t)]) *
              (double(others[size_t(t)] * std::fabs(dP[size_t(t)])) + weighted_size[size_t(t)] + dP_size[size_t(t)]);
        }

        // Pass 2: the exact gradients this row adds: dQ_i = c sum_t dT_t k_j; dK_j += c dT_t q_i;
        // dV_j += p_t dO_i.
        for (int64_t t = 0; t < n; ++t) {
          const int64_t j = row.keys[size_t(t)];
          const T* k_j = p.k + s.k_at(b, h, j);
          long double* dk_exact = ref.dk.exact.data() + s.k_at(b, h, j);
          long double* dv_exact = ref.dv.exact.data() + s.v_at(b, h, j);
          for (int64_t k = 0; k < s.dk; ++k) {
            dq_exact[k] += c * dT[size_t(t)] * (long double)k_j[k];
            dk_exact[k] += c * dT[size_t(t)] * (long double)q_i[k];
          }
          for (int64_t col = 0; col < s.dv; ++col) dv_exact[col] += row.weights[size_t(t)] * (long double)dO[col];
        }

        // Pass 3: what a correct backward may err by in this row, for each model (docs: P from the
        // saved lse or by a softmax of its own, D from the given out or from P and dP, any order).
        const double lse_abs = double(std::fabs(row.lse)) * (1 + 0x1p-52);
        for (int m = 0; m < 2 && in_range; ++m) {
          const Model& e = models[m];
          std::vector<double> dP_error(static_cast<size_t>(n)), P_error(dP_error), dT_error(dP_error), dT_size(dP_error);
          double D_from_P = 0, D_from_P_size = 0;
          for (int64_t t = 0; t < n; ++t) {
            const double p_t = double(row.weights[size_t(t)]);
            // P: the forward's weight error A_t, or exp(s_t - lse); flushed; rounded to a 2-byte
            // format for the P^T dO product. exp(s - lse)'s argument errs by the score's error E_t, the given lse's rounding (and
            // with own_forward its forward bound), the subtraction's and the exp's.
            const double tau = row.score_error[size_t(t)] + e.u * lse_abs + (own_forward ? row.lse_bound : 0) +
                               2 * e.u * (row.score_size[size_t(t)] + lse_abs + 1) - std::log1p(-kExpUnits * e.u);
            double P_t;
            if (e.rigorous) {
              P_t = std::max(row.weight_error[size_t(t)], p_t * std::expm1(tau));
            } else {
              // First order, the larger of the two ways: a softmax of its own (the forward's unit), or
              // exp(s - lse), whose argument errs by about u (1 + S + |lse|); once that reaches 1 (wide
              // logits in float) the exp makes the error exponential, first order means nothing, and
              // the unit is the bound's own.
              const double argument = e.u * (1 + row.score_size[size_t(t)] + lse_abs);
              P_t = p_t * (std::max(e.u * (1 + row.score_size[size_t(t)] + row.gap[size_t(t)]),
                                    argument < 1 ? argument : std::expm1(tau)) +
                           row.score_flush[size_t(t)]);
            }
            P_t += 2 * e.tiny;  // P underflowed or flushed (both models: it is no loss of precision)
            if (narrow) P_t += a.storage_u * (p_t + P_t) + a.storage_subnormal;
            P_error[size_t(t)] = P_t;
            dP_error[size_t(t)] =
                e.g(double(s.dv + 2)) * dP_size[size_t(t)] + flushed(e.tiny, dO_sum + v_sum[size_t(t)], double(s.dv));
            D_from_P += P_t * double(std::fabs(dP[size_t(t)])) + (p_t + P_t) * dP_error[size_t(t)];
            D_from_P_size += (p_t + P_t) * (double(std::fabs(dP[size_t(t)])) + dP_error[size_t(t)]);
          }
          // No bound on P (a score so large that the given lse's rounding alone moves exp(s - lse)
          // past any limit, as FlashAttention's recomputation would): the row is not checked.
          if (!std::isfinite(D_from_P_size)) {
            std::fill_n(dq_bound, s.dk, kInf);
            for (int64_t j : permitted) key_of(b, h, j).unchecked = true;
            break;
          }
          // D: dO . (the given out), which errs by the dot product's roundings and the given out's
          // own rounding; or sum_t P_t dP_t. The larger error of the two.
          double given = 0;
          for (int64_t col = 0; col < s.dv; ++col)
            given += std::fabs(double(dO[col])) * (u_out * double(std::fabs(row.out[size_t(col)])) + half_subnormal_out +
                                                   (own_forward ? row.bound[size_t(col)] : 0));
          const double D_from_out =
              e.g(double(s.dv + 2)) * dO_o_size + inflate(given, 2 * s.dv) + flushed(e.tiny, dO_sum + o_sum, double(s.dv));
          const double D_error = std::max(D_from_out, D_from_P + e.g(double(n + 2)) * D_from_P_size + 2 * double(n) * e.tiny);

          for (int64_t t = 0; t < n; ++t) {
            const double p_t = double(row.weights[size_t(t)]), P_t = P_error[size_t(t)];
            const double spread = double(std::fabs(others[size_t(t)] * dP[size_t(t)] - weighted[size_t(t)]));
            const double dS_t = double(std::fabs(dS[size_t(t)]));
            // dS_t = P_t (dP_t - D): the errors of the three factors, the subtraction and the product
            // (and, for the bound, the oracle's own).
            double dS_error =
                P_t * spread + (p_t + P_t) * (dP_error[size_t(t)] + D_error) +
                (e.rigorous ? 2 * e.u * (p_t + P_t) * (spread + dP_error[size_t(t)] + D_error) + own_dS[size_t(t)] : e.u * dS_t) +
                2 * e.tiny;
            // The soft-cap's derivative 1 - x^2, x = tanh(t / cap): x errs by its tanh, the division
            // and t's error over the cap.
            double dT_t = dS_error;
            if (!row.cap_slope.empty()) {
              const double slope = double(row.cap_slope[size_t(t)]);
              const double x_error = e.rigorous ? (kTanhUnits + 2) * e.u + row.score_error[size_t(t)] / p.softcap
                                                : e.u * (1 + row.score_size[size_t(t)] / p.softcap);
              const double slope_error = 2 * x_error + (e.rigorous ? x_error * x_error + 2 * e.u : 0);
              dT_t = dS_error * (slope + slope_error) + dS_t * slope_error +
                     (e.rigorous ? e.u * (dS_t + dS_error) * (slope + slope_error) : 0) + e.tiny;
            }
            // Rounded to a 2-byte format before the dQ and dK products: dS, or dT after the soft-cap's
            // factor (<= 1), whichever the kernel rounds; the absolute part is the larger after it.
            const double dT_abs = double(std::fabs(dT[size_t(t)]));
            if (narrow) dT_t += a.storage_u * (dT_abs + dT_t) + a.storage_subnormal;
            dT_error[size_t(t)] = dT_t;
            dT_size[size_t(t)] = dT_abs + dT_t;
            // Rounded to a 2-byte format, dT must fit it: else the row is outside the model's range.
            // And an error without bound (an overflowing term) leaves the row unchecked.
            if (narrow && dT_size[size_t(t)] * (1 + a.storage_u) >= a.storage_max) in_range = false;
            in_range &= std::isfinite(dT_size[size_t(t)]) && std::isfinite(P_error[size_t(t)]);
          }
          if (!in_range) {
            std::fill_n(dq_bound, s.dk, kInf);
            for (int64_t j : permitted) key_of(b, h, j).unchecked = true;
            break;
          }

          // dQ_i = c sum_t dT_t k_j: the terms' errors, and any order of their sum and the scale.
          for (int64_t k = 0; k < s.dk; ++k) {
            double error = 0, size = 0, factors = 0;
            for (int64_t t = 0; t < n; ++t) {
              const double k_jk = std::fabs(double(p.k[s.k_at(b, h, row.keys[size_t(t)]) + k]));
              error += dT_error[size_t(t)] * k_jk;
              size += dT_size[size_t(t)] * k_jk;
              factors += c_abs * dT_size[size_t(t)] + k_jk;
            }
            error = c_abs * inflate(error, 2 * n);
            size = c_abs * inflate(size, 2 * n);
            const double flush = flushed(e.tiny, inflate(factors, 2 * n), double(n));
            const double own = e.rigorous ? kOracleUnit * double(n + s.dv + 8) * size : 0;
            // The scale may come before the sum or after it: both must fit.
            const bool fits = std::max(size, size / c_abs) < room;
            (m == 0 ? dq_bound : dq_natural)[k] = fits ? error + e.g(double(n + 3)) * size + flush + own : kInf;
          }
          // dK_j and dV_j: this row's terms, summed over every row that sees the key.
          for (int64_t t = 0; t < n; ++t) {
            const int64_t j = row.keys[size_t(t)];
            KeyTerms& key = key_of(b, h, j);
            key.rows += m == 0;
            const double p_t = double(row.weights[size_t(t)]);
            for (int64_t k = 0; k < s.dk; ++k) {
              const double q_ik = std::fabs(double(q_i[k]));
              key.dk_error[m][size_t(k)] += c_abs * dT_error[size_t(t)] * q_ik;
              key.dk_size[m][size_t(k)] += c_abs * dT_size[size_t(t)] * q_ik;
              if (m == 0) key.dk_factors[size_t(k)] += c_abs * dT_size[size_t(t)] + q_ik;
            }
            for (int64_t col = 0; col < s.dv; ++col) {
              const double dO_c = std::fabs(double(dO[col]));
              key.dv_error[m][size_t(col)] += P_error[size_t(t)] * dO_c;
              key.dv_size[m][size_t(col)] += (p_t + P_error[size_t(t)]) * dO_c;
              if (m == 0) key.dv_factors[size_t(col)] += p_t + P_error[size_t(t)] + dO_c;
            }
          }
        }
      }

  const double room = a.max_finite;

  // dK and dV: each key's sums of its rows, in any order (gamma of their count), flushed terms,
  // and the oracle's own long double sums.
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t g = 0; g < s.kv_heads(); ++g)
      for (int64_t j = 0; j < s.Tk; ++j) {
        const KeyTerms& key = keys[size_t((b * s.kv_heads() + g) * s.Tk + j)];
        const int64_t at_k = ((b * s.kv_heads() + g) * s.Tk + j) * s.dk, at_v = ((b * s.kv_heads() + g) * s.Tk + j) * s.dv;
        if (key.unchecked) {
          std::fill_n(ref.dk.exact.begin() + at_k, s.dk, kNaN);
          std::fill_n(ref.dk.bound.begin() + at_k, s.dk, kInf);
          std::fill_n(ref.dv.exact.begin() + at_v, s.dv, kNaN);
          std::fill_n(ref.dv.bound.begin() + at_v, s.dv, kInf);
          continue;
        }
        const double count = double(key.rows);
        for (int m = 0; m < 2; ++m) {
          const Model& e = models[m];
          ExactTensor* into[2] = {&ref.dk, &ref.dv};
          for (int which = 0; which < 2; ++which) {
            const std::vector<double>& error = which == 0 ? key.dk_error[m] : key.dv_error[m];
            const std::vector<double>& size = which == 0 ? key.dk_size[m] : key.dv_size[m];
            const std::vector<double>& factors = which == 0 ? key.dk_factors : key.dv_factors;
            const int64_t at = which == 0 ? at_k : at_v;
            for (size_t x = 0; x < error.size(); ++x) {
              const double flush = flushed(e.tiny, inflate(factors[x], int64_t(2 * count)), count);
              const double own = e.rigorous ? kOracleUnit * (count + double(s.dk + s.dv) + 8) * size[x] : 0;
              const double unscaled = which == 0 ? std::max(size[x], size[x] / c_abs) : size[x];  // as dQ's
              const double total = 8 * unscaled >= room ? kInf
                                                        : inflate(error[x], int64_t(2 * count)) +
                                                              e.g(count + 3) * inflate(size[x], int64_t(2 * count)) + flush + own;
              (m == 0 ? into[which]->bound : into[which]->natural)[size_t(at) + x] = total;
            }
          }
        }
      }

  // Every gradient rounded to a 2-byte format at the end; the bound's own arithmetic.
  for (ExactTensor* t : {&ref.dq, &ref.dk, &ref.dv})
    for (size_t x = 0; x < t->exact.size(); ++x) {
      double& bound = t->bound[x];
      const double exact = double(std::fabs(t->exact[x]));
      if (!std::isfinite(bound)) continue;
      if (narrow) {
        bound += a.storage_u * (exact + bound) + a.storage_subnormal / 2;
        t->natural[x] += a.storage_u * exact + a.storage_subnormal / 2;
      }
      bound = !narrow || (exact + bound) * (1 + a.storage_u) < a.storage_max ? bound * kSelfInflation : kInf;
    }
  return ref;
}

template GradReference<float> reference_backward(const Problem<float>&, const float*, bool);
template GradReference<double> reference_backward(const Problem<double>&, const double*, bool);

}  // namespace attncheck
