/* A kernel with three planted bugs of three kinds, for --keep-going: one run must report each
 * (cli/tests, check.KeepGoing*). It crashes when Tk is 7; it ignores an explicit scale (always
 * 1/sqrt(dk)): wrong values; a row with no permitted key gives 0/0, NaN: a wrong special value.
 * Otherwise the plain float32 kernel of examples/plugins/plain_f32.c, plugin ABI v1.
 * Built with HANG_AT_TK7 (hangs_at_tk7), it is that kernel without the bugs, but for one: it never
 * returns when Tk is 7 (the adaptive case timeout, check.AHangOnOneShapeCostsSeconds). */
#include <math.h>
#include <stdint.h>

#include "attncheck/plugin.h"

int32_t attncheck_abi_version(void) { return 1; }

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
#ifdef HANG_AT_TK7
  volatile int forever = 1;
  while (Tk == 7 && forever) {
  }
  const float scale = p->scale != 0 ? (float)p->scale : 1.0f / sqrtf((float)dk);
#else
  if (Tk == 7) *(volatile int *)0 = 1;          /* bug 1: a crash on one shape */
  const float scale = 1.0f / sqrtf((float)dk);  /* bug 2: p->scale ignored */
#endif
  enum { kMaxKeys = 8192 };
  float s[kMaxKeys];
  if (Tk > kMaxKeys) return 1;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const float *q_i = q + ((b * H + h) * Tq + i) * dk, *k_bh = k + (b * H + h) * Tk * dk,
                    *v_bh = v + (b * H + h) * Tk * dv;
        float *out_i = out + ((b * H + h) * Tq + i) * dv;
        float max = -INFINITY;
        for (int64_t j = 0; j < Tk; ++j) {
          if (!permitted(p, b, i, j)) continue;
          float dot = 0;
          for (int64_t c = 0; c < dk; ++c) dot += q_i[c] * k_bh[j * dk + c];
          s[j] = dot * scale;
          if (s[j] == -INFINITY) continue;
          if (!(s[j] <= max)) max = s[j];
        }
        float l = 0; /* bug 3: no guard for a row with no permitted key: 0 / 0 */
        for (int64_t c = 0; c < dv; ++c) out_i[c] = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          if (!permitted(p, b, i, j) || s[j] == -INFINITY) continue;
          const float e = expf(s[j] - max);
          l += e;
          for (int64_t c = 0; c < dv; ++c) out_i[c] += e * v_bh[j * dv + c];
        }
#ifdef HANG_AT_TK7
        if (l == 0) continue;  /* a row with no permitted key: 0 */
#endif
        for (int64_t c = 0; c < dv; ++c) out_i[c] /= l;
      }
  return 0;
}
