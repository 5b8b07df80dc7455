/* A decoder's attention as inference runtimes compute it (ONNX Runtime's GroupQueryAttention, a
   KV cache's prefill and decode): float32, grouped KV heads, every call causal and aligned at the
   bottom right (query i of Tq sees keys j <= i + Tk - Tq: the new queries are the last Tq
   positions), an online softmax over the keys. Plugin ABI v2, and it says what it takes with
   attncheck_restrictions: causal calls only, lower-right only.

   Built with -DDECODE it is a decode step's kernel: one new query a call (Tq 1) and heads 64 or 128
   wide, its limits (attncheck_limits_v2), as a runtime's decode kernel is specialized.

   cc -O2 -shared -fPIC -I contract/include examples/plugins/gqa_lower_right.c -o gqa_lower_right.so -lm */
#include <math.h>
#include <stdint.h>

#include "attncheck/plugin.h"

int32_t attncheck_abi_version(void) { return 2; }
uint32_t attncheck_capabilities(void) { return ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_GQA; }
#ifdef DECODE
uint32_t attncheck_restrictions(void) {
  return ATTNCHECK_ONLY_CAUSAL | ATTNCHECK_ONLY_LOWER_RIGHT | ATTNCHECK_ONLY_WITHIN_LIMITS;
}
void attncheck_limits_v2(attncheck_limits *limits) {
  limits->max_q_len = 1;
  limits->head_dims[0] = 64;
  limits->head_dims[1] = 128;
}
#else
uint32_t attncheck_restrictions(void) { return ATTNCHECK_ONLY_CAUSAL | ATTNCHECK_ONLY_LOWER_RIGHT; }
#endif

int32_t attncheck_forward_v2(const attncheck_problem_v2 *p) {
  /* q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv], out [B,H,Tq,dv]; query head h reads KV head
     h / (H / H_kv). */
  const float *q = p->q, *k = p->k, *v = p->v;
  float *out = p->out;
  const int64_t B = p->batch, H = p->heads, H_kv = p->kv_heads, Tq = p->q_len, Tk = p->kv_len, dk = p->d_k, dv = p->d_v;
  const float scale = p->scale != 0 ? (float)p->scale : 1.0f / sqrtf((float)dk);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t g = h / (H / H_kv);
        const float *q_i = q + ((b * H + h) * Tq + i) * dk;
        const float *k_bg = k + (b * H_kv + g) * Tk * dk, *v_bg = v + (b * H_kv + g) * Tk * dv;
        float *acc = out + ((b * H + h) * Tq + i) * dv;
        for (int64_t c = 0; c < dv; ++c) acc[c] = 0;
        /* Keys 0 .. i + Tk - Tq (none when Tq > Tk and i < Tq - Tk: an empty row, output 0). The
           running maximum m and normalizer l: each new key rescales what was summed by exp(m_old - m). */
        float m = -INFINITY, l = 0;
        for (int64_t j = 0; j <= i + Tk - Tq; ++j) {
          float s = 0;
          for (int64_t c = 0; c < dk; ++c) s += q_i[c] * k_bg[j * dk + c];
          s *= scale;
          if (s == -INFINITY) continue; /* weight 0: a row of only such keys is empty */
          const float m_new = s > m ? s : m;
          if (isnan(s)) m = NAN; /* a NaN score makes the row NaN */
          const float rescale = m == -INFINITY ? 0.0f : expf(m - m_new), e = expf(s - m_new);
          for (int64_t c = 0; c < dv; ++c) acc[c] = acc[c] * rescale + e * v_bg[j * dv + c];
          l = l * rescale + e;
          m = isnan(m) ? m : m_new;
        }
        if (l == 0 && m == -INFINITY) continue; /* no key carried weight: an empty row */
        for (int64_t c = 0; c < dv; ++c) acc[c] /= l;
      }
  return 0;
}
