/* A kernel written outside attncheck, through ABI v2, whose output is right (double arithmetic,
 * rounded once) and whose log-sum-exp is in base 2 (flashinfer issue 2114): the output passes,
 * and attncheck must report the log-sum-exp. f32; allow, key lengths, causal, grouped KV heads. */
#include <math.h>
#include <stdlib.h>

#include "attncheck/plugin.h"

int32_t attncheck_abi_version(void) { return 2; }

uint32_t attncheck_capabilities(void) {
  return ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_ALLOW | ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_KV_LENS | ATTNCHECK_CAP_GQA |
         ATTNCHECK_CAP_LSE;
}

static int permitted(const attncheck_problem_v2 *p, int b, int i, int j) {
  if (p->allow && !p->allow[((size_t)b * p->q_len + i) * p->kv_len + j]) return 0;
  if (p->kv_lens && j >= p->kv_lens[b]) return 0;
  if (p->causal == 1 && j > i) return 0;
  if (p->causal == 2 && j > i + p->kv_len - p->q_len) return 0;
  return 1;
}

int32_t attncheck_forward_v2(const attncheck_problem_v2 *p) {
  if (!p || p->dtype != ATTNCHECK_F32) return 1;
  const float *q = p->q, *k = p->k, *v = p->v;
  float *out = p->out, *lse = p->lse;
  const double scale = p->scale != 0 ? p->scale : 1 / sqrt((double)p->d_k);
  const int group = p->heads / p->kv_heads;
  double *score = malloc(sizeof(double) * (size_t)p->kv_len), *acc = malloc(sizeof(double) * (size_t)p->d_v);
  if (!score || !acc) return 2;
  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < p->heads; ++h)
      for (int i = 0; i < p->q_len; ++i) {
        const size_t row = ((size_t)b * p->heads + h) * p->q_len + i, kv = (size_t)b * p->kv_heads + h / group;
        const float *q_i = q + row * p->d_k;
        double m = -INFINITY, l = 0;
        for (int j = 0; j < p->kv_len; ++j) {
          score[j] = -INFINITY;
          if (!permitted(p, b, i, j)) continue;
          double dot = 0;
          for (int c = 0; c < p->d_k; ++c) dot += (double)q_i[c] * k[(kv * p->kv_len + j) * p->d_k + c];
          score[j] = scale * dot;
          if (score[j] > m || isnan(score[j])) m = score[j];
        }
        for (int c = 0; c < p->d_v; ++c) acc[c] = 0;
        for (int j = 0; j < p->kv_len && m != -INFINITY; ++j) {
          if (score[j] == -INFINITY) continue;
          const double e = exp(score[j] - m);
          l += e;
          for (int c = 0; c < p->d_v; ++c) acc[c] += e * v[(kv * p->kv_len + j) * p->d_v + c];
        }
        for (int c = 0; c < p->d_v; ++c) out[row * p->d_v + c] = m == -INFINITY ? 0.0f : (float)(acc[c] / l);
        /* The bug: log2 of the normalizer and the maximum in base 2, not the natural log. */
        if (lse) lse[row] = m == -INFINITY ? -INFINITY : (float)((m + log(l)) / log(2.0));
      }
  free(score);
  free(acc);
  return 0;
}
