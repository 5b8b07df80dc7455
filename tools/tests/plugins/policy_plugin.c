/* Kernels written to a runtime's convention, one chosen at build time by CONVENTION, its name (see
 * tools/tests/CMakeLists.txt): each must pass under its policy (docs/contract.md, "Policies") and
 * be flagged without it, and the planted ones must be flagged under it too.
 *   1 MEAN_OF_V     correct; a row with no permitted key gives the mean of its values over all keys
 *                   (--empty-rows mean)
 *   2 FINITE_MASK   JAX's: a forbidden score becomes -0.7 FLT_MAX, a finite mask value, and the
 *                   softmax runs over every key. Its empty rows are the mean of V, but a permitted
 *                   score below the mask value loses to the forbidden keys: flagged even under
 *                   --empty-rows mean
 *   3 LSE_ZERO      correct, with its log-sum-exp; an empty row's is 0 (--lse-empty zero)
 *   4 TEXTBOOK      the course assignment's: scores, forbidden ones -inf, softmax, then weights @ v
 *                   over every key, so 0 * NaN puts a forbidden value's NaN in valid rows
 *                   (--masked-inputs finite)
 * float32, ABI v2: an allow mask, causal (both alignments), key lengths, grouped KV heads, lse. */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "attncheck/plugin.h"

#define MEAN_OF_V 1
#define FINITE_MASK 2
#define LSE_ZERO 3
#define TEXTBOOK 4

int32_t attncheck_abi_version(void) { return 2; }

uint32_t attncheck_capabilities(void) {
  /* MEAN_OF_V takes a bias too: a row whose permitted keys a -inf bias all forbids is empty as well. */
  return ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_ALLOW | ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_KV_LENS | ATTNCHECK_CAP_GQA |
         ATTNCHECK_CAP_LSE | (CONVENTION == MEAN_OF_V ? ATTNCHECK_CAP_BIAS : 0);
}

/* Whether query i of batch b may see key j. */
static int permitted(const attncheck_problem_v2 *p, int64_t b, int64_t i, int64_t j) {
  const int64_t Tq = p->q_len, Tk = p->kv_len;
  if (p->allow && !p->allow[(b * Tq + i) * Tk + j]) return 0;
  if (p->kv_lens && j >= p->kv_lens[b]) return 0;
  if ((p->causal == 1 && j > i) || (p->causal == 2 && j > i + Tk - Tq)) return 0;
  return 1;
}

int32_t attncheck_forward_v2(const attncheck_problem_v2 *p) {
  /* q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv], out [B,H,Tq,dv], lse [B,H,Tq] */
  const float *q = p->q, *k = p->k, *v = p->v, *bias = p->bias; /* bias [B,H,Tq,Tk] or none */
  float *out = p->out, *lse = p->lse;
  const int64_t B = p->batch, H = p->heads, Hkv = p->kv_heads, Tq = p->q_len, Tk = p->kv_len, dk = p->d_k, dv = p->d_v;
  const float scale = p->scale != 0 ? (float)p->scale : 1.0f / sqrtf((float)dk);
  enum { kMaxKeys = 8192 };
  float s[kMaxKeys], w[kMaxKeys];
  if (Tk > kMaxKeys) return 1;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t kv = h / (H / Hkv);
        const float *q_i = q + ((b * H + h) * Tq + i) * dk, *k_b = k + (b * Hkv + kv) * Tk * dk,
                    *v_b = v + (b * Hkv + kv) * Tk * dv;
        float *out_i = out + ((b * H + h) * Tq + i) * dv, *lse_i = lse ? lse + (b * H + h) * Tq + i : 0;
        /* Scores: a key that is forbidden, or scores -inf, weighs nothing (JAX's: the mask value). */
        float max = -INFINITY;
        for (int64_t j = 0; j < Tk; ++j) {
          float dot = 0;
          for (int64_t c = 0; c < dk; ++c) dot += q_i[c] * k_b[j * dk + c];
          /* A -inf bias forbids whatever the score (an overflowing one: inf + -inf would be NaN). */
          const float bias_ij = bias ? bias[((b * H + h) * Tq + i) * Tk + j] : 0.0f;
          s[j] = permitted(p, b, i, j) && bias_ij != -INFINITY ? dot * scale + bias_ij : -INFINITY;
#if CONVENTION == FINITE_MASK
          if (!permitted(p, b, i, j)) s[j] = -0.7f * FLT_MAX;
#endif
          if (isnan(s[j]) || (!isnan(max) && s[j] > max)) max = s[j]; /* NaN wins */
        }
        for (int64_t c = 0; c < dv; ++c) out_i[c] = 0;
        if (max == -INFINITY) { /* no key carries weight */
#if CONVENTION == MEAN_OF_V
          for (int64_t j = 0; j < Tk; ++j)
            for (int64_t c = 0; c < dv; ++c) out_i[c] += v_b[j * dv + c];
          for (int64_t c = 0; c < dv; ++c) out_i[c] /= (float)Tk;
#endif
          if (lse_i) *lse_i = CONVENTION == LSE_ZERO ? 0.0f : -INFINITY;
          continue;
        }
        /* Weights, then out = sum_j w_j v_j / l: over the weighted keys, or (TEXTBOOK) every key. */
        float l = 0;
        for (int64_t j = 0; j < Tk; ++j) l += (w[j] = s[j] == -INFINITY ? 0.0f : expf(s[j] - max));
        for (int64_t j = 0; j < Tk; ++j) {
          if (CONVENTION != TEXTBOOK && s[j] == -INFINITY) continue;
          for (int64_t c = 0; c < dv; ++c) out_i[c] += w[j] * v_b[j * dv + c];
        }
        for (int64_t c = 0; c < dv; ++c) out_i[c] /= l;
        if (lse_i) *lse_i = max + logf(l);
      }
  return 0;
}
