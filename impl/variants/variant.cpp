#include "variant.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#ifdef __SSE__
#include <xmmintrin.h>
#endif

namespace attncheck {
namespace {

using M = Mutation;

#ifdef __SSE__
constexpr unsigned kFlushToZero = 1u << 15, kDenormalsAreZero = 1u << 6;  // MXCSR bits
#endif

// Left-to-right or pairwise sum of x [n].
template <class A>
A sum(const A* x, int64_t n, bool pairwise) {
  if (!pairwise || n <= 2) {
    A total = 0;
    for (int64_t j = 0; j < n; ++j) total += x[j];
    return total;
  }
  return sum(x, n / 2, true) + sum(x + n / 2, n - n / 2, true);
}

// exp(x) through 2^f on [0, 1) by a quadratic: about 1.7e-3 relative error, varying with x.
template <class A>
A approx_exp(A x) {
  const A t = x * A(1.4426950408889634);
  const A k = std::floor(t), f = t - k;
  const int exponent = std::isnan(k) ? 0 : int(std::clamp(k, A(-1000), A(1000)));  // no UB on inf or NaN
  return std::ldexp(A(1) + f * (A(0.6565) + A(0.3435) * f), exponent);
}

// exp(s - m) the variant's way.
template <class A>
A exp_shifted(A s, A m, const Variant& v) {
  if (v.exp2) {
    const A log2e = A(1.4426950408889634);
    return std::exp2(s * log2e - m * log2e);
  }
  return v.mutation == M::approx_exp ? approx_exp(s - m) : std::exp(s - m);
}

// x rounded to bfloat16 (8 significant bits), ties to even.
template <class A>
A to_bf16(A x) {
  float f = float(x);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000u;
  std::memcpy(&f, &bits, 4);
  return A(f);
}

// The score a forbidden key gets under a sentinel mutation; NaN when it stays out.
double forbidden_score(M m) {
  switch (m) {
    case M::forbidden_zero: return 0;
    case M::sentinel_1e4: return -1e4;
    case M::sentinel_1e9: return -1e9;
    case M::sentinel_flt_max: return -FLT_MAX;
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

template <class T, class A>
void run(const Problem<T>& p, T* out, const Variant& v) {
  // Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], bias [B,H,Tq,Tk] in; out [B,H,Tq,dv] out.
  const Shape& s = p.shape;
  const A minus_inf = -std::numeric_limits<A>::infinity();
  double c = effective_scale(s, p.scale);
  if (p.scale == 0 && v.mutation == M::model_width_scale) c = 1 / std::sqrt(double(s.H * s.dk));
  if (v.mutation == M::no_scale) c = 1;
  if (v.mutation == M::explicit_scale_ignored) c = 1 / std::sqrt(double(s.dk));
  if (v.mutation == M::divide_by_scale) c = 1 / c;
  const A scale = A(c);
  const Causal causal = v.mutation != M::causal_swapped ? p.masks.causal
                        : p.masks.causal == Causal::upper_left  ? Causal::lower_right
                        : p.masks.causal == Causal::lower_right ? Causal::upper_left
                                                                : Causal::none;
  // The masks as the variant reads them: the contract's, or the mutant's misreading of them.
  const bool skip_padding = v.mutation == M::causal_ignores_padding && causal != Causal::none;
  std::vector<uint8_t> flipped;  // allow [B,Tq,Tk] read as MultiheadAttention's true = blocked
  if (v.mutation == M::inverted_polarity) {
    flipped.assign(size_t(s.allow_size()), 0);
    for (size_t n = 0; p.masks.allow && n < flipped.size(); ++n) flipped[n] = !p.masks.allow[n];
  }
  const Masks masks{skip_padding ? nullptr : flipped.empty() ? p.masks.allow : flipped.data(), causal,
                    skip_padding ? nullptr : p.masks.key_lengths};
  const double sentinel = forbidden_score(v.mutation);
  const bool over_queries = v.mutation == M::softmax_over_queries;

  // Per (b, h): scores [Tq,Tk] (-inf where forbidden; only kept whole for the over-queries mutant).
  std::vector<A> score_bh(size_t(s.Tq * s.Tk)), e(size_t(s.Tk)), terms(size_t(s.Tk)), acc(size_t(s.dv));
  std::vector<int64_t> keys;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t kv_h = v.mutation == M::shared_kv_heads ? 0 : h;  // the query head whose keys are read
      auto v_jc = [&](int64_t j, int64_t col) { return A(p.v[s.v_at(b, kv_h, j) + col]); };

      // Scores: s_ij = scale q_i . k_j + bias_ij, -inf where forbidden (or the mutant's sentinel).
      for (int64_t i = 0; i < s.Tq; ++i)
        for (int64_t j = 0; j < s.Tk; ++j) {
          const bool allowed =
              permits(masks, s, b, i, j) && !(p.bias && p.bias[s.scores_at(b, h, i) + j] == minus_inf);
          A& s_ij = score_bh[size_t(i * s.Tk + j)];
          if (!allowed) {
            s_ij = std::isnan(sentinel) ? minus_inf : A(sentinel);
            continue;
          }
          const T* q_i = p.q + s.q_at(b, h, i);
          const T* k_j = p.k + s.k_at(b, kv_h, j);
          A dot = 0;
          for (int64_t k = 0; k < s.dk; ++k) {
            const A q = v.prescale ? A(scale * A(q_i[k])) : A(q_i[k]);
            dot = v.fma ? std::fma(q, A(k_j[k]), dot) : dot + q * A(k_j[k]);
          }
          s_ij = v.prescale ? dot : scale * dot;
          if (p.bias) s_ij += A(p.bias[s.scores_at(b, h, i) + j]);
        }
      if (over_queries) {  // the wrong axis: a stable softmax down each column, used as the weights
        for (int64_t j = 0; j < s.Tk; ++j) {
          A m = minus_inf, l = 0;
          for (int64_t i = 0; i < s.Tq; ++i) m = std::max(m, score_bh[size_t(i * s.Tk + j)]);
          for (int64_t i = 0; i < s.Tq; ++i) l += std::exp(score_bh[size_t(i * s.Tk + j)] - m);
          for (int64_t i = 0; i < s.Tq; ++i) {
            A& w = score_bh[size_t(i * s.Tk + j)];
            w = m == minus_inf ? A(0) : std::exp(w - m) / l;
          }
        }
        for (int64_t i = 0; i < s.Tq; ++i)
          for (int64_t col = 0; col < s.dv; ++col) {
            A o = 0;
            for (int64_t j = 0; j < s.Tk; ++j)
              if (score_bh[size_t(i * s.Tk + j)] != 0) o += score_bh[size_t(i * s.Tk + j)] * v_jc(j, col);
            out[s.out_at(b, h, i) + col] = T(o);
          }
        continue;
      }

      for (int64_t i = 0; i < s.Tq; ++i) {
        T* out_i = out + s.out_at(b, h, i);
        const A* score_i = score_bh.data() + i * s.Tk;

        // The keys that carry weight (or, for the multiply-forbidden mutant, every key).
        keys.clear();
        bool any_weight = false;
        for (int64_t j = 0; j < s.Tk; ++j) {
          any_weight |= score_i[j] != minus_inf;
          if (score_i[j] != minus_inf || v.mutation == M::multiply_forbidden_values) keys.push_back(j);
        }
        const int64_t n = int64_t(keys.size());
        if (!any_weight) {
          const bool nan = p.empty_rows == EmptyRows::nan || v.mutation == M::empty_row_nan;
          for (int64_t col = 0; col < s.dv; ++col) out_i[col] = nan ? std::numeric_limits<T>::quiet_NaN() : T(0);
          continue;
        }

        // Softmax numerators e_t against a running or final maximum m, their sum l, and
        // acc_c = sum_t e_t v_tc, over blocks of keys (one block: two-pass).
        A m = minus_inf, l = 0;
        std::fill(acc.begin(), acc.end(), A(0));
        // Blocks of key positions, as a tiled kernel sees them: keys[start, stop) fall in the block.
        // A block with no key that carries weight is skipped, as a correct tiled kernel must.
        const int64_t width = v.block > 0 ? v.block : s.Tk;
        for (int64_t position = 0, start = 0; position < s.Tk; position += width) {
          int64_t stop = start;
          while (stop < n && keys[stop] < position + width) ++stop;
          A m_new = m;
          for (int64_t t = start; t < stop; ++t)
            if (score_i[keys[t]] > m_new || std::isnan(score_i[keys[t]])) m_new = std::isnan(m_new) ? m_new : score_i[keys[t]];
          if (m_new == minus_inf) {
            if (v.mutation == M::online_max_clamped) m = 0;  // flash-attention issue 2082
            start = stop;
            continue;
          }
          if (v.mutation == M::naive_softmax) m_new = 0;
          const A rescale = m == minus_inf ? A(0) : exp_shifted(m, m_new, v);
          for (int64_t t = start; t < stop; ++t) e[t] = exp_shifted(score_i[keys[t]], m_new, v);
          l = l * rescale + sum(e.data() + start, stop - start, v.pairwise);
          const A acc_rescale = v.mutation == M::online_no_rescale && m != minus_inf ? A(1) : rescale;
          for (int64_t col = 0; col < s.dv; ++col) {
            for (int64_t t = start; t < stop; ++t) terms[t] = e[t] * v_jc(keys[t], col);
            acc[col] = acc[col] * acc_rescale + sum(terms.data() + start, stop - start, v.pairwise);
          }
          m = m_new;
          start = stop;
        }
        const A inv_l = A(1) / l;

        // Normalize: in the two-pass form the weights first, then their weighted sum of values.
        const bool two_pass_weights = v.block == 0 && !v.defer_normalize;  // e_t are then exp(s_t - m)
        for (int64_t col = 0; col < s.dv; ++col) {
          A o;
          if (two_pass_weights) {
            for (int64_t t = 0; t < n; ++t) {
              A w = v.reciprocal ? e[t] * inv_l : e[t] / l;
              if (v.mutation == M::bf16_weights) w = to_bf16(w);
              terms[t] = w * v_jc(keys[t], col);
            }
            o = sum(terms.data(), n, v.pairwise);
          } else {
            o = v.reciprocal ? acc[col] * inv_l : acc[col] / l;
          }
          out_i[col] = T(o);
        }
      }
    }

  if (v.mutation == M::element_off_1e3) out[0] = T(out[0] * (1 + 1e-3));
  if (v.mutation == M::nan_element) out[0] = std::numeric_limits<T>::quiet_NaN();
}

}  // namespace

const std::vector<NamedVariant>& correct_variants() {
  static const std::vector<NamedVariant> all = {
      {"two_pass", {}},
      {"fma_pairwise_reciprocal", {.reciprocal = true, .pairwise = true, .fma = true}},
      {"double_accumulation", {.accumulate_double = true}},
      {"online_exp2_deferred", {.block = 3, .exp2 = true, .defer_normalize = true}},
      {"online_reciprocal_prescaled", {.block = 1, .reciprocal = true, .prescale = true}},
      {"blocked_pairwise", {.block = 8, .pairwise = true, .fma = true, .defer_normalize = true}},
      {"two_pass_flush_subnormals", {.flush_subnormals = true}},
      {"online_exp2_flush_subnormals", {.block = 3, .exp2 = true, .defer_normalize = true, .flush_subnormals = true}},
      {"prescaled_flush_subnormals", {.block = 1, .reciprocal = true, .prescale = true, .flush_subnormals = true}},
  };
  return all;
}

Variant mutant(Mutation mutation) {
  const bool online = mutation == M::online_no_rescale || mutation == M::online_max_clamped;
  return Variant{.block = online ? 4 : 0, .mutation = mutation};
}

template <class T>
void variant_attention(const Problem<T>& p, T* out, const Variant& v) {
#ifdef __SSE__
  const unsigned saved = _mm_getcsr();
  if (v.flush_subnormals) _mm_setcsr(saved | kFlushToZero | kDenormalsAreZero);
#endif
  if (v.accumulate_double)
    run<T, double>(p, out, v);
  else
    run<T, T>(p, out, v);
#ifdef __SSE__
  _mm_setcsr(saved);  // the mode is the call's own, as a well-behaved kernel keeps it
#endif
}

template void variant_attention(const Problem<float>&, float*, const Variant&);
template void variant_attention(const Problem<double>&, double*, const Variant&);

}  // namespace attncheck
