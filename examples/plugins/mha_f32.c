/* A multi-head attention layer in plain C, through plugin ABI v2's layer entry point alone
   (attncheck_mha_forward_v2, no attncheck_forward_v2): float32, an allow mask, causal masks and key
   lengths, and each head's weights when asked. Buffers are row-major (plugin.h, attncheck_mha_v2):
   x_q [B][Tq][D], x_kv [B][Tk][D], w_q [D][H dk], w_k and w_v [D][H dk] and [D][H dv] (H_kv = H: no
   grouped heads claimed), w_o [H dv][D], out [B][Tq][D], weights [B][H][Tq][Tk].

   Built with -DPLANTED_BUG it scales the scores by 1/sqrt(D), the model width, instead of
   1/sqrt(dk): the layer's commonest slip, caught in the first cases.

   cc -O1 -shared -fPIC -I contract/include examples/plugins/mha_f32.c -o mha_f32.so -lm */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "attncheck/plugin.h"

int32_t attncheck_abi_version(void) { return 2; }
uint32_t attncheck_capabilities(void) {
  return ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_ALLOW | ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_KV_LENS | ATTNCHECK_CAP_MHA |
         ATTNCHECK_CAP_MHA_WEIGHTS;
}

/* y [rows][cols] = x [rows][D] w [D][cols] + b [cols] (b NULL: none). */
static void project(const float *x, int64_t rows, int64_t D, const float *w, const float *b, int64_t cols, float *y) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float sum = b ? b[c] : 0;
      for (int64_t k = 0; k < D; ++k) sum += x[r * D + k] * w[k * cols + c];
      y[r * cols + c] = sum;
    }
}

/* Whether query i of batch b may see key j. */
static int permitted(const attncheck_mha_v2 *m, int64_t b, int64_t i, int64_t j) {
  const int64_t Tq = m->q_len, Tk = m->kv_len;
  if (m->allow && !m->allow[(b * Tq + i) * Tk + j]) return 0;
  if (m->kv_lens && j >= m->kv_lens[b]) return 0;
  if (m->causal == 1 && j > i) return 0;
  if (m->causal == 2 && j > i + Tk - Tq) return 0;
  return 1;
}

/* Head h of query i of batch b: its weights p [Tk] and output into merged [B][Tq][H dv]. */
static void attend(const attncheck_mha_v2 *m, const float *q, const float *k, const float *v, int64_t b, int64_t h,
                   int64_t i, float *p, float *merged) {
  const int64_t Tq = m->q_len, Tk = m->kv_len, H = m->heads, dk = m->d_k, dv = m->d_v;
#ifdef PLANTED_BUG
  const float scale = m->scale != 0 ? (float)m->scale : 1.0f / sqrtf((float)m->d_model);
#else
  const float scale = m->scale != 0 ? (float)m->scale : 1.0f / sqrtf((float)dk);
#endif
  const float *q_i = q + (b * Tq + i) * H * dk + h * dk;
  float max = -INFINITY;
  for (int64_t j = 0; j < Tk; ++j) {
    p[j] = -INFINITY;
    if (!permitted(m, b, i, j)) continue;
    float dot = 0;
    for (int64_t c = 0; c < dk; ++c) dot += q_i[c] * k[(b * Tk + j) * H * dk + h * dk + c];
    p[j] = dot * scale;
    if (p[j] > max) max = p[j];
  }
  float l = 0;
  for (int64_t j = 0; j < Tk; ++j) {
    p[j] = max == -INFINITY || p[j] == -INFINITY ? 0 : expf(p[j] - max);
    l += p[j];
  }
  float *o = merged + (b * Tq + i) * H * dv + h * dv;
  for (int64_t c = 0; c < dv; ++c) o[c] = 0;
  if (l == 0) return; /* no permitted key: head output 0, weights 0 */
  for (int64_t j = 0; j < Tk; ++j) {
    p[j] /= l;
    for (int64_t c = 0; c < dv; ++c) o[c] += p[j] * v[(b * Tk + j) * H * dv + h * dv + c];
  }
}

int32_t attncheck_mha_forward_v2(const attncheck_mha_v2 *m) {
  if (!m || m->dtype != ATTNCHECK_F32 || m->kv_heads != m->heads || m->window_left >= 0 || m->window_right >= 0) return 4;
  const int64_t B = m->batch, Tq = m->q_len, Tk = m->kv_len, D = m->d_model, H = m->heads, dk = m->d_k, dv = m->d_v;
  float *q = malloc(sizeof(float) * B * Tq * H * dk), *k = malloc(sizeof(float) * B * Tk * H * dk),
        *v = malloc(sizeof(float) * B * Tk * H * dv), *merged = malloc(sizeof(float) * B * Tq * H * dv),
        *p = malloc(sizeof(float) * Tk);
  int32_t status = q && k && v && merged && p ? 0 : 1;
  if (status == 0) {
    /* Pass 1: the projections; pass 2: attention per head; pass 3: the output projection. */
    project(m->x_q, B * Tq, D, m->w_q, m->b_q, H * dk, q);
    project(m->x_kv, B * Tk, D, m->w_k, m->b_k, H * dk, k);
    project(m->x_kv, B * Tk, D, m->w_v, m->b_v, H * dv, v);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < Tq; ++i) {
          attend(m, q, k, v, b, h, i, p, merged);
          if (m->weights)
            for (int64_t j = 0; j < Tk; ++j) m->weights[((b * H + h) * Tq + i) * Tk + j] = p[j];
        }
    project(merged, B * Tq, H * dv, m->w_o, m->b_o, D, m->out);
  }
  free(q);
  free(k);
  free(v);
  free(merged);
  free(p);
  return status;
}
