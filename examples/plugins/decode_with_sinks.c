/* A decode kernel of a language model's server: new queries against each sequence's KV cache
   (kv_lens[b] keys of the Tk slots are the cache, the rest padding), the cache dense or paged (K and
   V pools of blocks found through a block table, as vLLM keeps them), causal at the cache's end
   (ATTNCHECK_CAUSAL_KV_END: query i sees keys j <= i + kv_lens[b] - Tq), grouped KV heads, and a
   learned sink logit per head in the softmax's denominator (gpt-oss). As flash-decoding computes
   it: the keys in splits of 16, each split's partial (maximum, normalizer, weighted values) merged
   into the row by its maximum, the sink joining last; float32, with its log-sum-exp.

   Built with -DPLANTED_BUG, the diagonal sits at the padded cache's end (j <= i + Tk - Tq) instead
   of each sequence's own length, as a kernel written for one long sequence would put it.

   cc -O2 -shared -fPIC -I contract/include examples/plugins/decode_with_sinks.c -o decode_with_sinks.so -lm */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "attncheck/plugin.h"

enum { kSplit = 16 }; /* keys per split */

int32_t attncheck_abi_version(void) { return 2; }
uint32_t attncheck_capabilities(void) {
  return ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_KV_LENS | ATTNCHECK_CAP_GQA | ATTNCHECK_CAP_KV_CACHE |
         ATTNCHECK_CAP_SINKS | ATTNCHECK_CAP_LSE | ATTNCHECK_CAP_PAGED_KV;
}

/* Whether p carries an appended member (a checker built before it was appended sends a smaller struct). */
#define HAS(p, member) ((p)->size >= (int32_t)(offsetof(attncheck_problem_v2, member) + sizeof(p)->member))

/* The row of K ([.., dk]) and V ([.., dv]) holding key j of batch b for KV head g: dense [B,H_kv,Tk,.],
   or paged, slot j % block_size of block block_table[b][j / block_size] of the pools [NB,H_kv,BS,.]. */
static int64_t kv_row(const attncheck_problem_v2 *p, int64_t b, int64_t g, int64_t j) {
  if (!HAS(p, blocks_per_seq) || !p->block_table) return (b * p->kv_heads + g) * p->kv_len + j;
  const int64_t block = p->block_table[b * p->blocks_per_seq + j / p->block_size];
  return (block * p->kv_heads + g) * p->block_size + j % p->block_size;
}

/* The running softmax of a row: maximum m, normalizer l, accumulator acc [dv]. */
typedef struct {
  float m, l;
} running;

/* Folds a partial (m_s, l_s, acc_s [dv]) into r and acc [dv], both rescaled to the larger maximum;
   a partial with no weight (m_s = -inf) adds nothing. */
static void merge(running *r, float *acc, running s, const float *acc_s, int64_t dv) {
  if (s.m == -INFINITY) return;
  const float m = isnan(s.m) || isnan(r->m) ? NAN : (s.m > r->m ? s.m : r->m);
  const float to_r = r->m == -INFINITY ? 0.0f : expf(r->m - m), to_s = expf(s.m - m);
  for (int64_t c = 0; c < dv; ++c) acc[c] = acc[c] * to_r + (acc_s ? acc_s[c] * to_s : 0.0f);
  r->l = r->l * to_r + s.l * to_s;
  r->m = m;
}

/* The last key query i may see: by the causal mode, and before the cache's (or the call's) end. */
static int64_t last_key(const attncheck_problem_v2 *p, int64_t b, int64_t i) {
  const int64_t Tq = p->q_len, Tk = p->kv_len, keys = p->kv_lens ? p->kv_lens[b] : Tk;
  int64_t last = keys - 1;
#ifdef PLANTED_BUG
  const int64_t cache_end = Tk;
#else
  const int64_t cache_end = keys;
#endif
  if (p->causal == 1 && i < last) last = i;
  if (p->causal == 2 && i + Tk - Tq < last) last = i + Tk - Tq;
  if (p->causal == ATTNCHECK_CAUSAL_KV_END && i + cache_end - Tq < last) last = i + cache_end - Tq;
  return last;
}

int32_t attncheck_forward_v2(const attncheck_problem_v2 *p) {
  /* q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv] (or pools, kv_row), sinks [H] or NULL; out
     [B,H,Tq,dv], lse [B,H,Tq] when asked. Query head h reads KV head h / (H / H_kv). */
  const int64_t B = p->batch, H = p->heads, H_kv = p->kv_heads, Tq = p->q_len, dk = p->d_k, dv = p->d_v;
  if (dv > 1024) return 1; /* its accumulators live on the stack */
  const float *q = p->q, *k = p->k, *v = p->v;
  float *out = p->out, *lse = p->lse;
  const float scale = p->scale != 0 ? (float)p->scale : 1.0f / sqrtf((float)dk);
  const int has_sinks = HAS(p, sinks) && p->sinks;
  float acc_s[1024];
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t g = h / (H / H_kv), last = last_key(p, b, i);
        const float *q_i = q + ((b * H + h) * Tq + i) * dk;
        float *acc = out + ((b * H + h) * Tq + i) * dv;
        running row = {-INFINITY, 0};
        for (int64_t c = 0; c < dv; ++c) acc[c] = 0;
        for (int64_t start = 0; start <= last; start += kSplit) { /* one split: its own pass, then merged */
          running split = {-INFINITY, 0};
          for (int64_t c = 0; c < dv; ++c) acc_s[c] = 0;
          for (int64_t j = start; j <= last && j < start + kSplit; ++j) {
            float s = 0;
            const float *k_j = k + kv_row(p, b, g, j) * dk, *v_j = v + kv_row(p, b, g, j) * dv;
            for (int64_t c = 0; c < dk; ++c) s += q_i[c] * k_j[c];
            s *= scale;
            if (s == -INFINITY) continue; /* weight 0 */
            const float m_new = isnan(s) || isnan(split.m) ? NAN : (s > split.m ? s : split.m);
            const float rescale = split.m == -INFINITY ? 0.0f : expf(split.m - m_new), e = expf(s - m_new);
            for (int64_t c = 0; c < dv; ++c) acc_s[c] = acc_s[c] * rescale + e * v_j[c];
            split.l = split.l * rescale + e;
            split.m = m_new;
          }
          merge(&row, acc, split, acc_s, dv);
        }
        if (has_sinks) merge(&row, acc, (running){p->sinks[h], 1.0f}, NULL, dv); /* no value: acc only rescaled */
        const int empty = row.m == -INFINITY;                                  /* no key and no sink: out 0 */
        for (int64_t c = 0; c < dv; ++c) acc[c] = empty ? 0.0f : acc[c] / row.l;
        if (lse) lse[(b * H + h) * Tq + i] = empty ? -INFINITY : row.m + logf(row.l);
      }
  return 0;
}
