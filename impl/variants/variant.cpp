#include "variant.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace attncheck {
namespace {

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

// 2^f on [0, 1) by a quadratic: about 1.7e-3 relative error, varying with the argument.
template <class A>
A approx_exp(A x) {
  const A t = x * A(1.4426950408889634);
  const A k = std::floor(t), f = t - k;
  return std::ldexp(A(1) + f * (A(0.6565) + A(0.3435) * f), int(std::fmax(k, A(-1000))));
}

template <class A>
A exp_of(A x, const Variant& v) {
  if (v.mutation == Mutation::approx_exp) return approx_exp(x);
  return std::exp(x);
}

// exp(s - m) the variant's way.
template <class A>
A exp_shifted(A s, A m, const Variant& v) {
  if (v.exp2) {
    const A log2e = A(1.4426950408889634);
    return std::exp2(s * log2e - m * log2e);
  }
  return exp_of(s - m, v);
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

template <class T, class A>
void run(const Problem<T>& p, T* out, const Variant& v) {
  // Q [B,H,Tq,dk], K [B,H,Tk,dk], V [B,H,Tk,dv], bias [B,H,Tq,Tk] in; out [B,H,Tq,dv] out.
  const Shape& s = p.shape;
  const A minus_inf = -std::numeric_limits<A>::infinity();
  double c = effective_scale(s, p.scale);
  if (v.mutation == Mutation::model_width_scale && p.scale == 0) c = 1 / std::sqrt(double(s.H * s.dk));
  const Causal causal = v.mutation != Mutation::causal_swapped ? p.masks.causal
                        : p.masks.causal == Causal::upper_left  ? Causal::lower_right
                        : p.masks.causal == Causal::lower_right ? Causal::upper_left
                                                                : Causal::none;
  const A scale = A(c);
  std::vector<A> score(size_t(s.Tk)), e(size_t(s.Tk)), terms(size_t(s.Tk)), acc(size_t(s.dv));
  std::vector<int64_t> keys;

  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        const int64_t bh = b * s.H + h;
        const T* q_i = p.q + (bh * s.Tq + i) * s.dk;
        T* out_i = out + (bh * s.Tq + i) * s.dv;
        auto v_jc = [&](int64_t j, int64_t col) { return A(p.v[(bh * s.Tk + j) * s.dv + col]); };

        // Scores, and the keys that carry weight.
        keys.clear();
        for (int64_t j = 0; j < s.Tk; ++j) {
          const bool allowed = (!p.masks.allow || p.masks.allow[(b * s.Tq + i) * s.Tk + j]) &&
                               causal_allows(causal, i, j, s.Tq, s.Tk) &&
                               (!p.masks.key_lengths || j < p.masks.key_lengths[b]);
          if (!allowed) continue;
          const T* k_j = p.k + (bh * s.Tk + j) * s.dk;
          A dot = 0;
          for (int64_t k = 0; k < s.dk; ++k) {
            const A q = v.prescale ? A(scale * A(q_i[k])) : A(q_i[k]);
            dot = v.fma ? std::fma(q, A(k_j[k]), dot) : dot + q * A(k_j[k]);
          }
          A s_ij = v.prescale ? dot : scale * dot;
          if (p.bias) s_ij += A(p.bias[(bh * s.Tq + i) * s.Tk + j]);
          if (s_ij == minus_inf) continue;
          score[keys.size()] = s_ij;
          keys.push_back(j);
        }
        const int64_t n = int64_t(keys.size());
        if (n == 0) {
          for (int64_t col = 0; col < s.dv; ++col)
            out_i[col] = p.empty_rows == EmptyRows::zero ? T(0) : std::numeric_limits<T>::quiet_NaN();
          continue;
        }

        // Softmax numerators e_j against a running or final maximum m, their sum l, and
        // acc_c = sum_j e_j v_jc (deferred) or the normalized weights' sum.
        A m = minus_inf, l = 0;
        std::fill(acc.begin(), acc.end(), A(0));
        const int64_t block = v.block > 0 ? v.block : n;
        for (int64_t start = 0; start < n; start += block) {
          const int64_t stop = std::min(n, start + block);
          A m_new = m;
          for (int64_t t = start; t < stop; ++t)
            if (score[t] > m_new || std::isnan(score[t])) m_new = std::isnan(m_new) ? m_new : score[t];
          const A rescale = m == minus_inf ? A(0) : exp_shifted(m, m_new, v);
          for (int64_t t = start; t < stop; ++t) e[t] = exp_shifted(score[t], m_new, v);
          l = l * rescale + sum(e.data() + start, stop - start, v.pairwise);
          for (int64_t col = 0; col < s.dv; ++col) {
            for (int64_t t = start; t < stop; ++t) terms[t] = e[t] * v_jc(keys[t], col);
            acc[col] = acc[col] * rescale + sum(terms.data() + start, stop - start, v.pairwise);
          }
          m = m_new;
        }
        const A inv_l = A(1) / l;
        const bool two_pass_weights = v.block == 0 && !v.defer_normalize;  // e_j are then exp(s_j - m)

        // Normalize: in the two-pass form the weights first, then their weighted sum of values.
        for (int64_t col = 0; col < s.dv; ++col) {
          A o;
          if (two_pass_weights) {
            for (int64_t t = 0; t < n; ++t) {
              A w = v.reciprocal ? e[t] * inv_l : e[t] / l;
              if (v.mutation == Mutation::bf16_weights) w = to_bf16(w);
              terms[t] = w * v_jc(keys[t], col);
            }
            o = sum(terms.data(), n, v.pairwise);
          } else {
            o = v.reciprocal ? acc[col] * inv_l : acc[col] / l;
          }
          out_i[col] = T(o);
        }
      }

  if (v.mutation == Mutation::element_off_1e3) out[0] = T(out[0] * (1 + 1e-3));
  if (v.mutation == Mutation::nan_element) out[0] = std::numeric_limits<T>::quiet_NaN();
}

}  // namespace

template <class T>
void variant_attention(const Problem<T>& p, T* out, const Variant& v) {
  if (v.accumulate_double)
    run<T, double>(p, out, v);
  else
    run<T, T>(p, out, v);
}

template void variant_attention(const Problem<float>&, float*, const Variant&);
template void variant_attention(const Problem<double>&, double*, const Variant&);

}  // namespace attncheck
