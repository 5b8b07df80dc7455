/* A bfloat16 attention kernel with grouped KV heads and a sliding window, written as a user of
   attncheck would write one, checked through plugin ABI v2 (the README's walk-through). It computes
   as FlashAttention does: scores and the online softmax in float, one pass over the keys with a
   running maximum, the weights rounded to bfloat16 for the P V product, the output rounded to
   bfloat16, the log-sum-exp in float.

   Built with -DPLANTED_BUG it pairs query head h with KV head h % kv_heads instead of
   h / (heads / kv_heads) (onnx PR 7274), and attncheck must say so.

   cc -O2 -shared -fPIC -I contract/include examples/plugins/bf16_gqa_window.c -o bf16_gqa_window.so -lm */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attncheck/plugin.h"

/* bfloat16 is the top half of a float: widening is exact; narrowing rounds to nearest even. */
static float from_bf16(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

int32_t attncheck_abi_version(void) { return 2; }

uint32_t attncheck_capabilities(void) {
  return ATTNCHECK_CAP_BF16 | ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_KV_LENS | ATTNCHECK_CAP_GQA | ATTNCHECK_CAP_WINDOW |
         ATTNCHECK_CAP_LSE;
}

/* Whether query i of batch b may see key j: key lengths, causal (both alignments), the window
   around the lower-right diagonal i + Tk - Tq, both bounds inclusive. */
static int permitted(const attncheck_problem_v2 *p, int b, int i, int j) {
  const int diagonal = i + p->kv_len - p->q_len;
  if (p->kv_lens && j >= p->kv_lens[b]) return 0;
  if ((p->causal == 1 && j > i) || (p->causal == 2 && j > diagonal)) return 0;
  if (p->window_left >= 0 && j < diagonal - p->window_left) return 0;
  if (p->window_right >= 0 && j > diagonal + p->window_right) return 0;
  return 1;
}

int32_t attncheck_forward_v2(const attncheck_problem_v2 *p) {
  /* q [B][H][Tq][dk], k [B][H_kv][Tk][dk], v [B][H_kv][Tk][dv], out [B][H][Tq][dv]: bfloat16 bits;
     lse [B][H][Tq]: float. */
  if (!p || p->dtype != ATTNCHECK_BF16) return 4;
  const uint16_t *q = p->q, *k = p->k, *v = p->v;
  uint16_t *out = p->out;
  float *lse = p->lse;
  const int B = p->batch, H = p->heads, H_kv = p->kv_heads, Tq = p->q_len, Tk = p->kv_len, dk = p->d_k, dv = p->d_v;
#ifndef PLANTED_BUG
  const int group = H / H_kv;
#endif
  const float scale = p->scale != 0 ? (float)p->scale : 1.0f / sqrtf((float)dk);
  float *acc = malloc(sizeof(float) * (size_t)dv);
  if (!acc) return 5;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
#ifdef PLANTED_BUG
      const int g = h % H_kv;
#else
      const int g = h / group;
#endif
      const uint16_t *k_g = k + ((size_t)b * H_kv + g) * Tk * dk, *v_g = v + ((size_t)b * H_kv + g) * Tk * dv;
      for (int i = 0; i < Tq; ++i) {
        const uint16_t *q_i = q + (((size_t)b * H + h) * Tq + i) * dk;
        float m = -INFINITY, l = 0;
        for (int c = 0; c < dv; ++c) acc[c] = 0;
        for (int j = 0; j < Tk; ++j) {
          if (!permitted(p, b, i, j)) continue;
          float s = 0;
          for (int c = 0; c < dk; ++c) s += from_bf16(q_i[c]) * from_bf16(k_g[(size_t)j * dk + c]);
          s *= scale;
          if (s == -INFINITY) continue; /* no weight */
          if (s > m) {                  /* a new maximum: rescale what is summed so far */
            const float r = expf(m - s);
            l *= r;
            for (int c = 0; c < dv; ++c) acc[c] *= r;
            m = s;
          }
          const float e = expf(s - m);  /* NaN for a NaN or +inf score: the row becomes NaN */
          l += e;
          const float e_bf16 = from_bf16(to_bf16(e));  /* P in bfloat16 for the P V product */
          for (int c = 0; c < dv; ++c) acc[c] += e_bf16 * from_bf16(v_g[(size_t)j * dv + c]);
        }
        uint16_t *out_i = out + (((size_t)b * H + h) * Tq + i) * dv;
        for (int c = 0; c < dv; ++c) out_i[c] = to_bf16(l > 0 || l != l ? acc[c] / l : 0.0f);
        if (lse) lse[((size_t)b * H + h) * Tq + i] = l > 0 || l != l ? m + logf(l) : -INFINITY;
      }
    }
  free(acc);
  return 0;
}
