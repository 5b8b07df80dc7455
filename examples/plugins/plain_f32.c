/* The plainest attention kernel a user writes: float32, plugin ABI v1 (an allow mask and causal
   masks), two passes over the keys per query: the row maximum, then exp(s - max) summed with the
   values. docs/checking.md measures the campaign's speed and case counts on it, built at -O1.

   Its first draft took a row whose maximum stayed -inf for an empty row, and so zeroed a row with a
   NaN score (NaN > max is false): the NaN property caught it in the first round. Its second took
   exp(s - max) of a row whose every score was -inf (an inf in k), NaN where the row is empty:
   ANegativeInfiniteScoreWeighsNothing caught that.

   cc -O1 -shared -fPIC -I contract/include examples/plugins/plain_f32.c -o plain_f32.so -lm */
#include <math.h>
#include <stdint.h>

#include "attncheck/plugin.h"

int32_t attncheck_abi_version(void) { return 1; }

/* Whether query i of batch b may see key j. */
static int permitted(const attncheck_problem *p, int64_t b, int64_t i, int64_t j) {
  const int64_t Tq = p->q_len, Tk = p->kv_len;
  if (p->allow && !p->allow[(b * Tq + i) * Tk + j]) return 0;
  if (p->causal == 1 && j > i) return 0;
  if (p->causal == 2 && j > i + Tk - Tq) return 0;
  return 1;
}

int32_t attncheck_forward_f32(const attncheck_problem *p) {
  /* q [B,H,Tq,dk], k [B,H,Tk,dk], v [B,H,Tk,dv], out [B,H,Tq,dv] */
  const float *q = p->q, *k = p->k, *v = p->v;
  float *out = p->out;
  const int64_t B = p->batch, H = p->heads, Tq = p->q_len, Tk = p->kv_len, dk = p->d_k, dv = p->d_v;
  const float scale = p->scale != 0 ? (float)p->scale : 1.0f / sqrtf((float)dk);
  enum { kMaxKeys = 8192 };
  float s[kMaxKeys];
  if (Tk > kMaxKeys) return 1; /* refused: a finding, and said so */
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const float *q_i = q + ((b * H + h) * Tq + i) * dk, *k_bh = k + (b * H + h) * Tk * dk,
                    *v_bh = v + (b * H + h) * Tk * dv;
        float *out_i = out + ((b * H + h) * Tq + i) * dv;
        /* Pass 1: the scores of the permitted keys and their maximum (NaN wins). */
        float max = -INFINITY;
        int any = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          if (!permitted(p, b, i, j)) continue;
          float dot = 0;
          for (int64_t c = 0; c < dk; ++c) dot += q_i[c] * k_bh[j * dk + c];
          s[j] = dot * scale;
          if (s[j] == -INFINITY) continue; /* weight 0, as a masked key: a row of only such keys is empty */
          if (!(s[j] <= max)) max = s[j];
          any = 1;
        }
        for (int64_t c = 0; c < dv; ++c) out_i[c] = 0;
        if (!any) continue; /* an empty row: zeros, the default policy */
        /* Pass 2: l = sum exp(s - max), out = sum exp(s - max) v / l. */
        float l = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          if (!permitted(p, b, i, j) || s[j] == -INFINITY) continue;
          const float e = expf(s[j] - max);
          l += e;
          for (int64_t c = 0; c < dv; ++c) out_i[c] += e * v_bh[j * dv + c];
        }
        for (int64_t c = 0; c < dv; ++c) out_i[c] /= l;
      }
  return 0;
}
