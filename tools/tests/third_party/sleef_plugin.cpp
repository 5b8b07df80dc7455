/* A careful two-pass attention kernel whose exponentials are SLEEF's vectorized 1.0-ulp functions
 * (Debian 12's libsleef-dev 3.5.1): a real third-party kernel checked through plugin ABI v1.
 *
 * Per query row: scores of the permitted keys only, row max, exp and sum, normalize, weighted sum
 * of the values. A forbidden key (by the allow mask or the causal rule) is skipped: its key and value
 * are never read, not multiplied by 0. A permitted key whose score is -inf gets weight 0 and its value
 * is not read either. A row with no key left outputs 0. A NaN or +inf score makes the row NaN (the
 * row max is NaN-sticky, and exp(NaN) or exp(inf - inf) is NaN).
 *
 * The exps: Sleef_expf4_u10 (float, 4 lanes) and Sleef_expd2_u10 (double, 2 lanes), the 128-bit
 * entry points available on every x86-64 (SLEEF dispatches them at run time to its SSE2, SSE4.1 or
 * AVX2-128 code, all within 1.0 ulp), applied to 4 or 2 keys at a time; the tail is padded with
 * -inf (exp gives 0) and the padded lanes are discarded.
 */
#include <emmintrin.h>
#include <sleef.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attncheck/plugin.h"

namespace {

// exp of n entries of x in place, `Lanes` at a time through SLEEF.
void exp_in_place(float* x, int64_t n) {
  constexpr int64_t Lanes = 4;
  int64_t j = 0;
  for (; j + Lanes <= n; j += Lanes) _mm_storeu_ps(x + j, Sleef_expf4_u10(_mm_loadu_ps(x + j)));
  if (j < n) {
    alignas(16) float tail[Lanes];
    for (int64_t l = 0; l < Lanes; ++l) tail[l] = j + l < n ? x[j + l] : -std::numeric_limits<float>::infinity();
    _mm_store_ps(tail, Sleef_expf4_u10(_mm_load_ps(tail)));
    for (int64_t l = 0; j + l < n; ++l) x[j + l] = tail[l];
  }
}

void exp_in_place(double* x, int64_t n) {
  constexpr int64_t Lanes = 2;
  int64_t j = 0;
  for (; j + Lanes <= n; j += Lanes) _mm_storeu_pd(x + j, Sleef_expd2_u10(_mm_loadu_pd(x + j)));
  if (j < n) {
    alignas(16) double tail[Lanes];
    for (int64_t l = 0; l < Lanes; ++l) tail[l] = j + l < n ? x[j + l] : -std::numeric_limits<double>::infinity();
    _mm_store_pd(tail, Sleef_expd2_u10(_mm_load_pd(tail)));
    for (int64_t l = 0; j + l < n; ++l) x[j + l] = tail[l];
  }
}

template <class T>
int32_t forward(const attncheck_problem* p) {
  // q [B,H,Tq,dk], k [B,H,Tk,dk], v [B,H,Tk,dv], allow [B,Tq,Tk] (or NULL); out [B,H,Tq,dv].
  if (!p || !p->q || !p->k || !p->v || !p->out) return 1;
  if (p->batch < 1 || p->heads < 1 || p->q_len < 1 || p->kv_len < 1 || p->d_k < 1 || p->d_v < 1) return 1;
  if (p->causal < 0 || p->causal > 2 || !std::isfinite(p->scale)) return 1;
  const int64_t B = p->batch, H = p->heads, Tq = p->q_len, Tk = p->kv_len, dk = p->d_k, dv = p->d_v;
  const T* q = static_cast<const T*>(p->q);
  const T* k = static_cast<const T*>(p->k);
  const T* v = static_cast<const T*>(p->v);
  T* out = static_cast<T*>(p->out);
  const T scale = T(p->scale != 0 ? p->scale : 1.0 / std::sqrt(double(dk)));
  const T minus_inf = -std::numeric_limits<T>::infinity();

  // Per-row workspaces [<= Tk]: the permitted keys of row i, then those whose score is not -inf,
  // and their scores, turned weights.
  std::vector<int64_t> permitted, keys;
  std::vector<T> w;
  permitted.reserve(size_t(Tk));
  keys.reserve(size_t(Tk));
  w.reserve(size_t(Tk));

  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Tq; ++i) {
      // Permitted keys of query i in batch b, shared by all heads: allow AND causal.
      permitted.clear();
      for (int64_t j = 0; j < Tk; ++j) {
        if (p->allow && !p->allow[(b * Tq + i) * Tk + j]) continue;
        if (p->causal == 1 && j > i) continue;
        if (p->causal == 2 && j > i + Tk - Tq) continue;
        permitted.push_back(j);
      }
      for (int64_t h = 0; h < H; ++h) {
        const int64_t bh = b * H + h;
        const T* q_i = q + (bh * Tq + i) * dk;  // [dk]
        T* out_i = out + (bh * Tq + i) * dv;    // [dv]

        // Pass 1: scores of the permitted keys; drop those at -inf; row max, NaN-sticky.
        keys.clear();
        w.clear();
        T m = minus_inf;
        for (int64_t j : permitted) {
          const T* k_j = k + (bh * Tk + j) * dk;  // [dk]
          T dot = 0;
          for (int64_t c = 0; c < dk; ++c) dot += q_i[c] * k_j[c];
          const T s = scale * dot;
          if (s == minus_inf) continue;
          keys.push_back(j);
          w.push_back(s);
          if (std::isnan(s) || (s > m && !std::isnan(m))) m = s;
        }
        if (keys.empty()) {  // no permitted key: output 0
          for (int64_t c = 0; c < dv; ++c) out_i[c] = 0;
          continue;
        }

        // Pass 2: w = exp(s - m) through SLEEF, their sum (>= 1: the max gives exp(0) = 1), normalize.
        const int64_t n = int64_t(keys.size());
        for (int64_t t = 0; t < n; ++t) w[size_t(t)] -= m;
        exp_in_place(w.data(), n);
        T sum = 0;
        for (int64_t t = 0; t < n; ++t) sum += w[size_t(t)];
        for (int64_t t = 0; t < n; ++t) w[size_t(t)] /= sum;

        // Weighted sum of the values of the keys that carry weight.
        for (int64_t c = 0; c < dv; ++c) out_i[c] = 0;
        for (int64_t t = 0; t < n; ++t) {
          const T* v_j = v + (bh * Tk + keys[size_t(t)]) * dv;  // [dv]
          for (int64_t c = 0; c < dv; ++c) out_i[c] += w[size_t(t)] * v_j[c];
        }
      }
    }
  return 0;
}

}  // namespace

extern "C" {

int32_t attncheck_abi_version(void) { return 1; }
int32_t attncheck_forward_f32(const attncheck_problem* p) { return forward<float>(p); }
int32_t attncheck_forward_f64(const attncheck_problem* p) { return forward<double>(p); }

}  // extern "C"
