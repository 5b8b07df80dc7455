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
#include <stdexcept>

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

// The quantities of one row i that its passes share: the row's exact forward, its inputs, and
// where its dQ goes.
template <class T>
struct Row {
  int64_t b, h, i;
  const ExactRow& exact;
  int64_t n;                       // the keys that carry weight: exact.keys
  const T* q_i;                    // [dk]
  const T* dO;                     // [dv]
  long double* dq_exact;           // [dk]
  double *dq_bound, *dq_natural;   // [dk]
  std::vector<int64_t> permitted;  // the keys the row reads, weightless ones included
};

// Pass 1's results for one row, each [n] but the sums: dP_t, dS_t and dT_t exactly, and the sizes
// the bound needs.
struct Spread {
  std::vector<long double> dP, dS, dT;
  std::vector<double> dP_size, v_sum;           // sum_c |dO_c v_jc|, sum_c |v_jc|
  double dO_sum = 0, dO_o_size = 0, o_sum = 0;  // sum |dO|, sum |dO||o_i|, sum |o_i|
  std::vector<long double> others, weighted;    // O_t = sum_{k != t} p_k, W_t = sum_{k != t} p_k dP_k
  std::vector<double> weighted_size;            // sum_{k != t} p_k |dP_k|
  std::vector<double> own_dS;                   // the oracle's error in dS_t
};

// dP_t - D without its cancellation: as sum_k p_k = 1, dP_t - D = sum_{k != t} p_k (dP_t - dP_k)
// = O_t dP_t - W_t, O_t = sum_{k != t} p_k and W_t = sum_{k != t} p_k dP_k from prefix and suffix
// sums (where p_t is 1 - 5.6e-42, 1 - p_t is O_t, which long double keeps and p_t does not). Its
// own error: 2^-62 (n + dv + 4) of O_t |dP_t| + sum_{k != t} p_k |dP_k| (charged). Then
// dS_t = p_t (dP_t - D) and dT_t, in sp from sp.dP.
//   Differentiates p_ij = exp(s_ij - lse_i), and s_ij = cap tanh(c q_i . k_j / cap).
void spread_of(const ExactRow& row, int64_t n, int64_t dv, Spread& sp) {
  sp.others.resize(size_t(n));
  sp.weighted = sp.others;
  sp.weighted_size.resize(size_t(n));
  long double p_before = 0, w_before = 0;
  double size_before = 0;
  for (int64_t t = 0; t < n; ++t) {
    sp.others[size_t(t)] = p_before;
    sp.weighted[size_t(t)] = w_before;
    sp.weighted_size[size_t(t)] = size_before;
    p_before += row.weights[size_t(t)];
    w_before += row.weights[size_t(t)] * sp.dP[size_t(t)];
    size_before += double(row.weights[size_t(t)] * std::fabs(sp.dP[size_t(t)]));
  }
  long double p_after = 0, w_after = 0;
  double size_after = 0;
  for (int64_t t = n - 1; t >= 0; --t) {
    sp.others[size_t(t)] += p_after;
    sp.weighted[size_t(t)] += w_after;
    sp.weighted_size[size_t(t)] = inflate(sp.weighted_size[size_t(t)] + size_after, n);
    p_after += row.weights[size_t(t)];
    w_after += row.weights[size_t(t)] * sp.dP[size_t(t)];
    size_after += double(row.weights[size_t(t)] * std::fabs(sp.dP[size_t(t)]));
  }
  sp.own_dS.resize(size_t(n));
  for (int64_t t = 0; t < n; ++t) {
    const long double spread = sp.others[size_t(t)] * sp.dP[size_t(t)] - sp.weighted[size_t(t)];
    sp.dS[size_t(t)] = row.weights[size_t(t)] * spread;
    sp.dT[size_t(t)] = row.cap_slope.empty() ? sp.dS[size_t(t)] : sp.dS[size_t(t)] * row.cap_slope[size_t(t)];
    sp.own_dS[size_t(t)] =
        kOracleUnit * double(n + dv + 4) * double(row.weights[size_t(t)]) *
        (double(sp.others[size_t(t)] * std::fabs(sp.dP[size_t(t)])) + sp.weighted_size[size_t(t)] + sp.dP_size[size_t(t)]);
  }
}

// One model's errors in a row's terms (pass 3), each [n].
struct TermErrors {
  std::vector<double> P, dP, dT, dT_size;
  double D_from_P = 0, D_from_P_size = 0;
};

// The backward of one problem: its passes over the rows, then the keys' sums.
template <class T>
class Backward {
 public:
  Backward(const Problem<T>& p, const T* dout, bool own_forward);
  GradReference<T> run();

 private:
  const Problem<T>& p;
  const Shape& s;
  const T* dout;  // [B,H,Tq,dv]
  const bool own_forward;
  const Arithmetic a;
  const bool narrow;
  const std::vector<ExactRow> rows;
  const long double c;
  const double c_abs;
  const Model models[2];
  GradReference<T> ref;
  double u_out = 0, half_subnormal_out = 0;
  std::vector<KeyTerms> keys;  // [B][H_kv][Tk]

  KeyTerms& key_of(int64_t b, int64_t h, int64_t j) { return keys[size_t((b * s.kv_heads() + s.kv_head(h)) * s.Tk + j)]; }
  void prepare_tensors();
  void give_forward();
  void row(int64_t b, int64_t h, int64_t i);
  bool readable(Row<T>& r);
  void leave_unchecked(const Row<T>& r);
  Spread pass_dP(const Row<T>& r) const;
  void pass_exact(const Row<T>& r, const Spread& sp);
  bool pass_bound(const Row<T>& r, const Spread& sp, int m);
  TermErrors P_errors(const Row<T>& r, const Spread& sp, const Model& e) const;
  double D_error(const Row<T>& r, const Spread& sp, const TermErrors& te, const Model& e) const;
  bool dT_errors(const Row<T>& r, const Spread& sp, TermErrors& te, double D, const Model& e) const;
  void dq_bound(const Row<T>& r, const TermErrors& te, const Model& e, int m) const;
  void add_key_terms(const Row<T>& r, const TermErrors& te, int m);
  void key_bounds();
  void round_at_the_end();
};

template <class T>
Backward<T>::Backward(const Problem<T>& problem, const T* dout_, bool own)
    : p(problem),
      s(problem.shape),
      dout(dout_),
      own_forward(own),
      a(Arithmetic::of(problem.format)),
      narrow(a.storage_u > 0),
      rows(exact_rows(problem)),
      c(problem.scale != 0 ? (long double)problem.scale : 1 / std::sqrt((long double)problem.shape.dk)),
      c_abs(double(std::fabs(c)) * (1 + 0x1p-50)),
      models{{true, a.u, a.tiny}, {false, a.u, a.tiny}} {}

template <class T>
GradReference<T> Backward<T>::run() {
  // Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], dout [B,H,Tq,dv] in; the reference out.
  prepare_tensors();
  give_forward();
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) row(b, h, i);
  key_bounds();
  round_at_the_end();
  return std::move(ref);
}

// dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv], zeroed; each key's sums [B][H_kv][Tk].
template <class T>
void Backward<T>::prepare_tensors() {
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
  keys.resize(size_t(s.B * s.kv_heads() * s.Tk));
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
}

// The inputs a backward gets: the exact out [B,H,Tq,dv] and lse [B,H,Tq] rounded to their formats
// (out to a 2-byte format through double: within 2^-52 |o| of a single rounding, charged below).
template <class T>
void Backward<T>::give_forward() {
  ref.out.resize(size_t(s.out_size()));
  ref.lse.resize(size_t(s.lse_size()));
  for (int64_t r = 0; r < s.lse_size(); ++r) {
    const ExactRow& row = rows[size_t(r)];
    ref.lse[size_t(r)] = T(row.lse);
    for (int64_t col = 0; col < s.dv; ++col)
      ref.out[size_t(r * s.dv + col)] = narrow ? T(round_to(p.format, double(row.out[size_t(col)]))) : T(row.out[size_t(col)]);
  }
  // |given out - out| <= u_out |o| + half the format's smallest subnormal.
  u_out = (narrow ? a.storage_u : a.u) + 0x1p-52;
  half_subnormal_out = narrow ? a.storage_subnormal / 2 : a.tiny * a.u;
}

// Row (b, h, i): its exact dQ and its terms of its keys' dK and dV (pass 2), and what a correct
// backward may err by in each (passes 1 and 3).
template <class T>
void Backward<T>::row(int64_t b, int64_t h, int64_t i) {
  const ExactRow& exact = rows[size_t(s.lse_at(b, h, i))];
  Row<T> r{b,
           h,
           i,
           exact,
           int64_t(exact.keys.size()),
           p.q + s.q_at(b, h, i),
           dout + s.out_at(b, h, i),
           ref.dq.exact.data() + s.q_at(b, h, i),
           ref.dq.bound.data() + s.q_at(b, h, i),
           ref.dq.natural.data() + s.q_at(b, h, i),
           {}};
  if (!readable(r)) return;
  const Spread sp = pass_dP(r);
  // Sums a correct kernel forms must fit its arithmetic, in any order.
  const double room = a.max_finite / 8;
  bool in_range = sp.dO_o_size < room;
  for (double size : sp.dP_size) in_range &= size < room;
  if (!in_range) leave_unchecked(r);
  pass_exact(r, sp);
  for (int m = 0; m < 2 && in_range; ++m) in_range = pass_bound(r, sp, m);
}

// Whether the bound can follow row r, which reads r.permitted. Not a special forward row (a NaN or
// +inf score), one outside T's range, or a non-finite dO or q, or k or v of a key its masks permit
// (a key whose score is -inf carries no weight, but 0 times its inf is NaN wherever a kernel does
// not skip it): its dQ and its keys' dK and dV are not checked. A row with no permitted key reads
// nothing: its dQ is 0, exactly; so is a row whose every permitted score is -inf.
template <class T>
bool Backward<T>::readable(Row<T>& r) {
  const T* bias_i = p.bias ? p.bias + s.scores_at(r.b, r.h, r.i) : nullptr;
  bool finite = true;
  for (int64_t j = 0; j < s.Tk; ++j) {
    if (!permits(p.masks, s, r.b, r.i, j) || (bias_i && bias_i[j] == -std::numeric_limits<T>::infinity())) continue;
    r.permitted.push_back(j);
    const T* k_j = p.k + s.k_at(r.b, r.h, j);
    const T* v_j = p.v + s.v_at(r.b, r.h, j);
    for (int64_t k = 0; k < s.dk; ++k) finite &= std::isfinite(double(k_j[k]));
    for (int64_t col = 0; col < s.dv; ++col) finite &= std::isfinite(double(v_j[col]));
  }
  if (r.permitted.empty()) return false;
  finite &= r.n == 0 || (std::isfinite(r.exact.weights[0]) && std::isfinite(r.exact.lse));
  for (double x : r.exact.bound) finite &= std::isfinite(x);
  for (int64_t col = 0; col < s.dv; ++col) finite &= std::isfinite(double(r.dO[col]));
  for (int64_t k = 0; k < s.dk; ++k) finite &= std::isfinite(double(r.q_i[k]));
  if (!finite) {
    std::fill_n(r.dq_exact, s.dk, kNaN);
    std::fill_n(r.dq_bound, s.dk, kInf);
    for (int64_t j : r.permitted) key_of(r.b, r.h, j).unchecked = true;
    return false;
  }
  return r.n != 0;
}

// Row r's dQ and its keys' dK and dV are not checked.
template <class T>
void Backward<T>::leave_unchecked(const Row<T>& r) {
  std::fill_n(r.dq_bound, s.dk, kInf);
  for (int64_t j : r.permitted) key_of(r.b, r.h, j).unchecked = true;
}

// Pass 1: dP_t = dO_i . v_j and its size, D_i = sum_t p_t dP_t, dS_t, dT_t; and the sizes the bound
// needs: sum |dO||v_j|, sum |dO||o_i|, sum |dO|, sum |v_j|.
//   Differentiates o_i = sum_j p_ij v_j (dP) and p_ij = exp(s_ij - lse_i) (dS), and with a
//   soft-cap s_ij = cap tanh(c q_i . k_j / cap) (dT).
template <class T>
Spread Backward<T>::pass_dP(const Row<T>& r) const {
  const int64_t n = r.n;
  const ExactRow& row = r.exact;
  Spread sp;
  sp.dP.resize(size_t(n));
  sp.dS = sp.dT = sp.dP;
  sp.dP_size.resize(size_t(n));
  sp.v_sum = sp.dP_size;
  for (int64_t col = 0; col < s.dv; ++col) {
    sp.dO_sum += std::fabs(double(r.dO[col]));
    sp.dO_o_size += std::fabs(double(r.dO[col])) * double(std::fabs(row.out[size_t(col)]));
    sp.o_sum += double(std::fabs(row.out[size_t(col)]));
  }
  sp.dO_sum = inflate(sp.dO_sum, s.dv);
  sp.dO_o_size = inflate(sp.dO_o_size, 2 * s.dv);
  sp.o_sum = inflate(sp.o_sum, s.dv);
  for (int64_t t = 0; t < n; ++t) {
    const T* v_j = p.v + s.v_at(r.b, r.h, row.keys[size_t(t)]);
    long double dP_t = 0;
    double size = 0, sum_v = 0;
    for (int64_t col = 0; col < s.dv; ++col) {
      dP_t += (long double)r.dO[col] * (long double)v_j[col];
      size += std::fabs(double(r.dO[col]) * double(v_j[col]));
      sum_v += std::fabs(double(v_j[col]));
    }
    sp.dP[size_t(t)] = dP_t;
    sp.dP_size[size_t(t)] = inflate(size, s.dv);
    sp.v_sum[size_t(t)] = inflate(sum_v, s.dv);
  }
  spread_of(row, n, s.dv, sp);
  return sp;
}

// Pass 2: the exact gradients this row adds: dQ_i = c sum_t dT_t k_j; dK_j += c dT_t q_i;
// dV_j += p_t dO_i.
//   Differentiates s_ij = c q_i . k_j (dQ, dK) and o_i = sum_j p_ij v_j (dV).
template <class T>
void Backward<T>::pass_exact(const Row<T>& r, const Spread& sp) {
  for (int64_t t = 0; t < r.n; ++t) {
    const int64_t j = r.exact.keys[size_t(t)];
    const T* k_j = p.k + s.k_at(r.b, r.h, j);
    long double* dk_exact = ref.dk.exact.data() + s.k_at(r.b, r.h, j);
    long double* dv_exact = ref.dv.exact.data() + s.v_at(r.b, r.h, j);
    for (int64_t k = 0; k < s.dk; ++k) {
      r.dq_exact[k] += c * sp.dT[size_t(t)] * (long double)k_j[k];
      dk_exact[k] += c * sp.dT[size_t(t)] * (long double)r.q_i[k];
    }
    for (int64_t col = 0; col < s.dv; ++col) dv_exact[col] += r.exact.weights[size_t(t)] * (long double)r.dO[col];
  }
}

// Pass 3: what a correct backward may err by in row r under model m (docs: P from the saved lse or
// by a softmax of its own, D from the given out or from P and dP, any order). False when the row
// is left unchecked.
template <class T>
bool Backward<T>::pass_bound(const Row<T>& r, const Spread& sp, int m) {
  const Model& e = models[m];
  TermErrors te = P_errors(r, sp, e);
  // No bound on P (a score so large that the given lse's rounding alone moves exp(s - lse) past
  // any limit, as FlashAttention's recomputation would): the row is not checked.
  if (!std::isfinite(te.D_from_P_size)) {
    leave_unchecked(r);
    return false;
  }
  const double D = D_error(r, sp, te, e);
  if (!dT_errors(r, sp, te, D, e)) {
    leave_unchecked(r);
    return false;
  }
  dq_bound(r, te, e, m);
  add_key_terms(r, te, m);
  return true;
}

// P_t's error and dP_t's, and the sums of D = sum_t P_t dP_t's.
//   Differentiates p_ij = exp(s_ij - lse_i): P recomputed from the given lse, or the forward's.
template <class T>
TermErrors Backward<T>::P_errors(const Row<T>& r, const Spread& sp, const Model& e) const {
  const ExactRow& row = r.exact;
  const double lse_abs = double(std::fabs(row.lse)) * (1 + 0x1p-52);
  TermErrors te;
  te.dP.resize(size_t(r.n));
  te.P = te.dT = te.dT_size = te.dP;
  for (int64_t t = 0; t < r.n; ++t) {
    const double p_t = double(row.weights[size_t(t)]);
    // P: the forward's weight error A_t, or exp(s_t - lse); flushed; rounded to a 2-byte format
    // for the P^T dO product. exp(s - lse)'s argument errs by the score's error E_t, the given
    // lse's rounding (and with own_forward its forward bound), the subtraction's and the exp's.
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
      P_t =
          p_t * (std::max(e.u * (1 + row.score_size[size_t(t)] + row.gap[size_t(t)]), argument < 1 ? argument : std::expm1(tau)) +
                 row.score_flush[size_t(t)]);
    }
    P_t += 2 * e.tiny;  // P underflowed or flushed (both models: it is no loss of precision)
    if (narrow) P_t += a.storage_u * (p_t + P_t) + a.storage_subnormal;
    te.P[size_t(t)] = P_t;
    te.dP[size_t(t)] =
        e.g(double(s.dv + 2)) * sp.dP_size[size_t(t)] + flushed(e.tiny, sp.dO_sum + sp.v_sum[size_t(t)], double(s.dv));
    te.D_from_P += P_t * double(std::fabs(sp.dP[size_t(t)])) + (p_t + P_t) * te.dP[size_t(t)];
    te.D_from_P_size += (p_t + P_t) * (double(std::fabs(sp.dP[size_t(t)])) + te.dP[size_t(t)]);
  }
  return te;
}

// D: dO . (the given out), which errs by the dot product's roundings and the given out's own
// rounding; or sum_t P_t dP_t. The larger error of the two.
//   Differentiates o_i = sum_j p_ij v_j: D_i = dO_i . o_i = sum_j p_ij dP_ij.
template <class T>
double Backward<T>::D_error(const Row<T>& r, const Spread& sp, const TermErrors& te, const Model& e) const {
  double given = 0;
  for (int64_t col = 0; col < s.dv; ++col)
    given += std::fabs(double(r.dO[col])) * (u_out * double(std::fabs(r.exact.out[size_t(col)])) + half_subnormal_out +
                                             (own_forward ? r.exact.bound[size_t(col)] : 0));
  const double D_from_out =
      e.g(double(s.dv + 2)) * sp.dO_o_size + inflate(given, 2 * s.dv) + flushed(e.tiny, sp.dO_sum + sp.o_sum, double(s.dv));
  return std::max(D_from_out, te.D_from_P + e.g(double(r.n + 2)) * te.D_from_P_size + 2 * double(r.n) * e.tiny);
}

// dT_t's error and size: dS_t = P_t (dP_t - D), then the soft-cap's factor. False when a term
// leaves the model's range.
//   Differentiates p_ij = exp(s_ij - lse_i) (dS) and s_ij = cap tanh(c q_i . k_j / cap) (dT).
template <class T>
bool Backward<T>::dT_errors(const Row<T>& r, const Spread& sp, TermErrors& te, double D, const Model& e) const {
  bool in_range = true;
  for (int64_t t = 0; t < r.n; ++t) {
    const double p_t = double(r.exact.weights[size_t(t)]), P_t = te.P[size_t(t)];
    const double spread = double(std::fabs(sp.others[size_t(t)] * sp.dP[size_t(t)] - sp.weighted[size_t(t)]));
    const double dS_t = double(std::fabs(sp.dS[size_t(t)]));
    // dS_t = P_t (dP_t - D): the errors of the three factors, the subtraction and the product
    // (and, for the bound, the oracle's own).
    double dS_error = P_t * spread + (p_t + P_t) * (te.dP[size_t(t)] + D) +
                      (e.rigorous ? 2 * e.u * (p_t + P_t) * (spread + te.dP[size_t(t)] + D) + sp.own_dS[size_t(t)] : e.u * dS_t) +
                      2 * e.tiny;
    // The soft-cap's derivative 1 - x^2, x = tanh(t / cap): x errs by its tanh, the division
    // and t's error over the cap.
    double dT_t = dS_error;
    if (!r.exact.cap_slope.empty()) {
      const double slope = double(r.exact.cap_slope[size_t(t)]);
      const double x_error = e.rigorous ? (kTanhUnits + 2) * e.u + r.exact.score_error[size_t(t)] / p.softcap
                                        : e.u * (1 + r.exact.score_size[size_t(t)] / p.softcap);
      const double slope_error = 2 * x_error + (e.rigorous ? x_error * x_error + 2 * e.u : 0);
      dT_t = dS_error * (slope + slope_error) + dS_t * slope_error +
             (e.rigorous ? e.u * (dS_t + dS_error) * (slope + slope_error) : 0) + e.tiny;
    }
    // Rounded to a 2-byte format before the dQ and dK products: dS, or dT after the soft-cap's
    // factor (<= 1), whichever the kernel rounds; the absolute part is the larger after it.
    const double dT_abs = double(std::fabs(sp.dT[size_t(t)]));
    if (narrow) dT_t += a.storage_u * (dT_abs + dT_t) + a.storage_subnormal;
    te.dT[size_t(t)] = dT_t;
    te.dT_size[size_t(t)] = dT_abs + dT_t;
    // Rounded to a 2-byte format, dT must fit it: else the row is outside the model's range.
    // And an error without bound (an overflowing term) leaves the row unchecked.
    if (narrow && te.dT_size[size_t(t)] * (1 + a.storage_u) >= a.storage_max) in_range = false;
    in_range &= std::isfinite(te.dT_size[size_t(t)]) && std::isfinite(te.P[size_t(t)]);
  }
  return in_range;
}

// dQ_i = c sum_t dT_t k_j: the terms' errors, and any order of their sum and the scale.
//   Differentiates s_ij = c q_i . k_j in q_i.
template <class T>
void Backward<T>::dq_bound(const Row<T>& r, const TermErrors& te, const Model& e, int m) const {
  const double room = a.max_finite / 8;
  for (int64_t k = 0; k < s.dk; ++k) {
    double error = 0, size = 0, factors = 0;
    for (int64_t t = 0; t < r.n; ++t) {
      const double k_jk = std::fabs(double(p.k[s.k_at(r.b, r.h, r.exact.keys[size_t(t)]) + k]));
      error += te.dT[size_t(t)] * k_jk;
      size += te.dT_size[size_t(t)] * k_jk;
      factors += c_abs * te.dT_size[size_t(t)] + k_jk;
    }
    error = c_abs * inflate(error, 2 * r.n);
    size = c_abs * inflate(size, 2 * r.n);
    const double flush = flushed(e.tiny, inflate(factors, 2 * r.n), double(r.n));
    const double own = e.rigorous ? kOracleUnit * double(r.n + s.dv + 8) * size : 0;
    // The scale may come before the sum or after it: both must fit.
    const bool fits = std::max(size, size / c_abs) < room;
    (m == 0 ? r.dq_bound : r.dq_natural)[k] = fits ? error + e.g(double(r.n + 3)) * size + flush + own : kInf;
  }
}

// dK_j and dV_j: this row's terms, summed over every row that sees the key (key_bounds).
//   Differentiates s_ij = c q_i . k_j in k_j (dK) and o_i = sum_j p_ij v_j in v_j (dV).
template <class T>
void Backward<T>::add_key_terms(const Row<T>& r, const TermErrors& te, int m) {
  for (int64_t t = 0; t < r.n; ++t) {
    KeyTerms& key = key_of(r.b, r.h, r.exact.keys[size_t(t)]);
    key.rows += m == 0;
    const double p_t = double(r.exact.weights[size_t(t)]);
    for (int64_t k = 0; k < s.dk; ++k) {
      const double q_ik = std::fabs(double(r.q_i[k]));
      key.dk_error[m][size_t(k)] += c_abs * te.dT[size_t(t)] * q_ik;
      key.dk_size[m][size_t(k)] += c_abs * te.dT_size[size_t(t)] * q_ik;
      if (m == 0) key.dk_factors[size_t(k)] += c_abs * te.dT_size[size_t(t)] + q_ik;
    }
    for (int64_t col = 0; col < s.dv; ++col) {
      const double dO_c = std::fabs(double(r.dO[col]));
      key.dv_error[m][size_t(col)] += te.P[size_t(t)] * dO_c;
      key.dv_size[m][size_t(col)] += (p_t + te.P[size_t(t)]) * dO_c;
      if (m == 0) key.dv_factors[size_t(col)] += p_t + te.P[size_t(t)] + dO_c;
    }
  }
}

// dK and dV: each key's sums of its rows, in any order (gamma of their count), flushed terms, and
// the oracle's own long double sums.
template <class T>
void Backward<T>::key_bounds() {
  const double room = a.max_finite;
  for (int64_t key_at = 0; key_at < int64_t(keys.size()); ++key_at) {  // (b H_kv + g) Tk + j
    const KeyTerms& key = keys[size_t(key_at)];
    const int64_t at_k = key_at * s.dk, at_v = key_at * s.dv;
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
}

// Every gradient rounded to a 2-byte format at the end; the bound's own arithmetic.
template <class T>
void Backward<T>::round_at_the_end() {
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
}

}  // namespace

template <class T>
GradReference<T> reference_backward(const Problem<T>& p, const T* dout, bool own_forward) {
  // No backward call carries sinks (call_slots.def): their gradient is not in the contract yet.
  if (p.sinks) throw std::logic_error("the oracle's backward takes no sinks");
  return Backward<T>(p, dout, own_forward).run();
}

template GradReference<float> reference_backward(const Problem<float>&, const float*, bool);
template GradReference<double> reference_backward(const Problem<double>&, const double*, bool);

}  // namespace attncheck
