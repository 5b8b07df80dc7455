/* Causal self-attention as GPT-2 style code computes it (llm.c's attention_forward, its four passes),
   behind attncheck's plugin ABI v2: float32, every call causal and square (Tq = Tk), the default
   scale 1/sqrt(dk), dk = dv. That is all such code takes, and it says so with
   attncheck_restrictions: attncheck then sends it nothing else.

   Built with -DPLANTED_BUG it keeps llm.c's own `float maxval = -10000.0f; // TODO something better`:
   a query whose visible scores all lie below about -10088 gets exp(s - maxval) = 0 for every key,
   and llm.c's `expsum == 0 ? 0 : 1 / expsum` turns the row into zeros.

   Its first draft took a row whose maximum stayed -inf for one with no key to weigh, and so zeroed
   a row whose only score was NaN (NaN > max is false): attncheck's first case said so.

   cc -O2 -shared -fPIC -I contract/include examples/plugins/causal_self_attention.c -o causal_self_attention.so -lm */
#include <math.h>
#include <stdint.h>

#include "attncheck/plugin.h"

int32_t attncheck_abi_version(void) { return 2; }
uint32_t attncheck_capabilities(void) { return ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_CAUSAL; }
uint32_t attncheck_restrictions(void) {
  return ATTNCHECK_ONLY_CAUSAL | ATTNCHECK_ONLY_SQUARE | ATTNCHECK_ONLY_DEFAULT_SCALE | ATTNCHECK_ONLY_EQUAL_HEAD_DIMS;
}

int32_t attncheck_forward_v2(const attncheck_problem_v2 *p) {
  /* q, k, v, out [B,H,T,hs] (T = Tq = Tk, hs = dk = dv); the causal mask: query t sees keys t2 <= t. */
  const float *q = p->q, *k = p->k, *v = p->v;
  float *out = p->out;
  const int64_t B = p->batch, H = p->heads, T = p->q_len, hs = p->d_k;
  const float scale = 1.0f / sqrtf((float)hs);
  enum { kMaxT = 8192 };
  float att[kMaxT];
  if (T > kMaxT) return 1; /* refused: a finding, and said so */
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const float *query_t = q + ((b * H + h) * T + t) * hs;
        const float *keys = k + (b * H + h) * T * hs, *values = v + (b * H + h) * T * hs;
        float *out_bth = out + ((b * H + h) * T + t) * hs;
        /* pass 1: the scores q . k * scale and their maximum */
#ifdef PLANTED_BUG
        float maxval = -10000.0f; /* TODO something better */
#else
        float maxval = -INFINITY;
#endif
        int weighed = 0; /* a score other than -inf: a key to weigh */
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          float val = 0.0f;
          for (int64_t i = 0; i < hs; ++i) val += query_t[i] * keys[t2 * hs + i];
          val *= scale;
          if (val > maxval) maxval = val;
          weighed |= val != -INFINITY;
          att[t2] = val;
        }
        for (int64_t i = 0; i < hs; ++i) out_bth[i] = 0.0f;
        /* Every score -inf (an inf in q or k): a row with no key to weigh, output 0 (exp(-inf - -inf)
           would be NaN). A NaN score never raises the maximum, and makes the sum NaN below. */
        if (!weighed) continue;
        /* pass 2: exp(s - max) and their sum */
        float expsum = 0.0f;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const float expv = expf(att[t2] - maxval);
          expsum += expv;
          att[t2] = expv;
        }
        const float expsum_inv = expsum == 0.0f ? 0.0f : 1.0f / expsum;
        /* passes 3 and 4: normalize, and sum the weighted values */
        for (int64_t t2 = 0; t2 <= t; ++t2)
          for (int64_t i = 0; i < hs; ++i) out_bth[i] += att[t2] * expsum_inv * values[t2 * hs + i];
      }
  return 0;
}
