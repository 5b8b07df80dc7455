/* attncheck plugin ABIs v1 and v2: the C interface through which attncheck checks an attention
 * kernel. These struct layouts and symbol names are fixed: users compile against them.
 * Shapes use attncheck's one vocabulary: B batch, H heads, Tq queries, Tk keys,
 * dk query/key width, dv value width. A query row with no permitted key gets output 0. */
#ifndef ATTNCHECK_PLUGIN_H
#define ATTNCHECK_PLUGIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTNCHECK_ABI_VERSION 1

typedef struct attncheck_problem {
  int32_t batch, heads, q_len, kv_len, d_k, d_v;   /* B, H, Tq, Tk, dk, dv, each >= 1 */
  const void *q;          /* [B][H][Tq][dk], contiguous, row-major; float for _f32, double for _f64 */
  const void *k;          /* [B][H][Tk][dk] */
  const void *v;          /* [B][H][Tk][dv] */
  const uint8_t *allow;   /* [B][Tq][Tk], shared by all heads; nonzero = may attend; NULL = all allowed */
  int32_t causal;         /* 0 none, 1 upper-left (j <= i), 2 lower-right (j <= i + Tk - Tq) */
  double scale;           /* 0 = default 1/sqrt(d_k) */
  void *out;              /* [B][H][Tq][dv], written by the implementation */
} attncheck_problem;

int32_t attncheck_abi_version(void);                        /* returns 1 (2 for ABI v2, below) */
int32_t attncheck_forward_f32(const attncheck_problem *p);  /* required; 0 = ok, non-zero = refused */
int32_t attncheck_forward_f64(const attncheck_problem *p);  /* optional */

/* ---- ABI v2: formats, grouped KV heads, windows, soft-caps, bias, key lengths, the log-sum-exp.
 * A v2 plugin returns 2 from attncheck_abi_version and exports attncheck_capabilities and
 * attncheck_forward_v2 (the v1 entry points are then not read). A key is permitted when every mask
 * permits it (allow, kv_lens, causal, window, a bias that is not -inf). A key whose score is -inf
 * (an inf in q or k, a soft-capped or biased score of -inf) gets weight 0 as a forbidden one does,
 * and a row whose every permitted score is -inf counts as a row with no permitted key: out 0 and
 * lse -inf. A row with a NaN or +inf permitted score gets out NaN and lse NaN. Capabilities a
 * kernel does not claim are never used in a problem it is sent. */
#define ATTNCHECK_ABI_VERSION_2 2

enum { ATTNCHECK_F32 = 0, ATTNCHECK_F64 = 1, ATTNCHECK_F16 = 2, ATTNCHECK_BF16 = 3 };
/* causal = 3, with ATTNCHECK_CAP_KV_CACHE: query i of batch b may see key j when j <= i + kv_lens[b] - Tq,
 * the diagonal at each batch's own cache length (FlashAttention's flash_attn_with_kvcache with
 * cache_seqlens; ONNX opset 24's is_causal with nonpad_kv_seqlen); without kv_lens, lower-right. */
#define ATTNCHECK_CAUSAL_KV_END 3
enum {                                   /* bits of attncheck_capabilities() */
  ATTNCHECK_CAP_F32 = 1u << 0, ATTNCHECK_CAP_F64 = 1u << 1, ATTNCHECK_CAP_F16 = 1u << 2, ATTNCHECK_CAP_BF16 = 1u << 3,
  ATTNCHECK_CAP_ALLOW = 1u << 4,         /* allow mask */
  ATTNCHECK_CAP_CAUSAL = 1u << 5,        /* both alignments */
  ATTNCHECK_CAP_KV_LENS = 1u << 6,
  ATTNCHECK_CAP_GQA = 1u << 7,           /* kv_heads < heads */
  ATTNCHECK_CAP_WINDOW = 1u << 8,
  ATTNCHECK_CAP_SOFTCAP = 1u << 9,
  ATTNCHECK_CAP_BIAS = 1u << 10,
  ATTNCHECK_CAP_LSE = 1u << 11,
  ATTNCHECK_CAP_BACKWARD = 1u << 12,     /* attncheck_backward_v2, the gradient issue */
  ATTNCHECK_CAP_DROPOUT = 1u << 13,      /* takes dropout_p > 0 */
  ATTNCHECK_CAP_DROPOUT_MASK = 1u << 14, /* and writes the keep mask it used when asked */
  ATTNCHECK_CAP_MHA = 1u << 15,          /* exports attncheck_mha_forward_v2 */
  ATTNCHECK_CAP_MHA_WEIGHTS = 1u << 16,  /* writes each head's attention weights when asked */
  ATTNCHECK_CAP_SINKS = 1u << 17,        /* takes attncheck_problem_v2's sinks */
  ATTNCHECK_CAP_KV_CACHE = 1u << 18,     /* takes causal = ATTNCHECK_CAUSAL_KV_END (with ATTNCHECK_CAP_CAUSAL) */
  ATTNCHECK_CAP_PAGED_KV = 1u << 19,     /* takes k and v as pools of blocks read through attncheck_problem_v2's block_table */
  ATTNCHECK_CAP_VARLEN = 1u << 20        /* takes sequences of different lengths packed along Tq and Tk (cu_seqlens_q, cu_seqlens_k) */
};
typedef struct attncheck_problem_v2 {
  int32_t size;                /* sizeof(attncheck_problem_v2) as the checker was built; later versions only append fields */
  int32_t dtype;               /* of q, k, v, bias, out; F16 and BF16 are uint16_t bit patterns */
  int32_t batch, heads, kv_heads, q_len, kv_len, d_k, d_v;   /* heads % kv_heads == 0; query head h reads KV head h / (heads / kv_heads) */
  const void *q;               /* [B][H][Tq][dk], contiguous, row-major */
  const void *k;               /* [B][H_kv][Tk][dk] */
  const void *v;               /* [B][H_kv][Tk][dv] */
  const uint8_t *allow;        /* [B][Tq][Tk], shared by all heads; nonzero = may attend; NULL = all */
  const int32_t *kv_lens;      /* [B]: keys j >= kv_lens[b] are padding; NULL = none */
  const void *bias;            /* [B][H][Tq][Tk] in dtype, added after the soft-cap; -inf forbids; NULL = none */
  int32_t causal;              /* 0 none, 1 upper-left (j <= i), 2 lower-right (j <= i + Tk - Tq), 3 ATTNCHECK_CAUSAL_KV_END */
  int32_t window_left, window_right;  /* -1 = unbounded; else key j needs i + Tk - Tq - window_left <= j <= i + Tk - Tq + window_right (FlashAttention's inclusive convention) */
  double scale;                /* 0 = 1/sqrt(d_k) */
  double softcap;              /* 0 = none; else score = softcap * tanh(scale * q.k / softcap), before bias and masks */
  void *out;                   /* [B][H][Tq][dv] in dtype */
  void *lse;                   /* [B][H][Tq] natural-log log-sum-exp of the row's permitted scores, float (double when dtype is F64); -inf for an empty row; NULL = not asked */
  /* Dropout (ATTNCHECK_CAP_DROPOUT), appended: present when size covers them; never set for a kernel that does not claim it. */
  double dropout_p;            /* 0 = none; else after the softmax each weight is kept with probability 1 - p and divided by 1 - p (lse stays that of the weights before dropout) */
  uint64_t dropout_seed;       /* the kernel's own random stream: the same problem and seed give the same result */
  uint8_t *dropout_keep;       /* [B][H][Tq][Tk]: 1 = kept, 0 = dropped, written by a kernel with ATTNCHECK_CAP_DROPOUT_MASK when not NULL */
  /* Attention sinks (ATTNCHECK_CAP_SINKS), appended as the dropout's fields were. */
  const float *sinks;          /* [H], float in every dtype: one logit per query head; every row's softmax denominator gains exp(sinks[h] - m) and no value: not scaled, not soft-capped, not masked; the lse includes it; a row with no permitted key outputs 0 and its lse is the sink's; -inf = no sink for that head; NULL = none */
  /* Paged KV (ATTNCHECK_CAP_PAGED_KV), appended as the sinks were. With a block_table, k and v are pools
   * [num_blocks][H_kv][block_size][dk] and [num_blocks][H_kv][block_size][dv], and key j of batch b
   * (j < kv_len, and j < kv_lens[b] when given) is slot j % block_size of block block_table[b][j / block_size].
   * blocks_per_seq * block_size >= kv_len; every entry is in [0, num_blocks). Slots past a sequence's
   * keys, entries past its last block and blocks no entry names hold anything (the checker poisons them). */
  const int32_t *block_table;  /* [B][blocks_per_seq]; NULL = dense k and v */
  int32_t num_blocks, block_size, blocks_per_seq;
  /* Varlen (ATTNCHECK_CAP_VARLEN), appended as the paged fields were. With cu_seqlens, the batch's B
   * sequences are packed: q is [H][total_q][dk] with total_q = q_len, k and v are [H_kv][total_k][dk]
   * and [..][dv] with total_k = kv_len, out is [H][total_q][dv] and lse [H][total_q]; sequence b's
   * queries are rows cu_seqlens_q[b] to cu_seqlens_q[b + 1] - 1, its keys likewise, and masks, causal
   * alignments and windows apply within each sequence at its own lengths (a sequence may be empty).
   * cu_seqlens_*[0] = 0, nondecreasing, cu_seqlens_q[B] = q_len and cu_seqlens_k[B] = kv_len. Never
   * with allow, kv_lens, bias, a block table, dropout, causal = 3 or the backward. */
  const int32_t *cu_seqlens_q, *cu_seqlens_k;  /* [B + 1] each; NULL = dense */
} attncheck_problem_v2;
uint32_t attncheck_capabilities(void);
int32_t  attncheck_forward_v2(const attncheck_problem_v2 *p);   /* 0 = ok; anything else for a problem within its capabilities is a finding */

/* The backward pass, with ATTNCHECK_CAP_BACKWARD. Gradients flow through the scale, the soft-cap and
 * every permitted key; a key no query may see gets dk = dv = 0, and a row with no permitted key
 * gives dq = 0. */
typedef struct attncheck_grads_v2 {
  const attncheck_problem_v2 *problem;  /* the forward problem; its out and lse hold the exact forward results rounded to their formats (inputs here, as FlashAttention's backward receives them) */
  const void *dout;            /* [B][H][Tq][dv] in dtype */
  void *dq;                    /* [B][H][Tq][dk] in dtype */
  void *dk;                    /* [B][H_kv][Tk][dk]: summed over the query heads that share each KV head */
  void *dv;                    /* [B][H_kv][Tk][dv] */
} attncheck_grads_v2;
int32_t attncheck_backward_v2(const attncheck_grads_v2 *g);   /* with ATTNCHECK_CAP_BACKWARD; 0 = ok */

/* The multi-head attention layer, with ATTNCHECK_CAP_MHA: projections, attention per head, the heads
 * merged and projected. A plugin may export it alone, without attncheck_forward_v2: the formats and
 * masks it claims are then the layer's. D is the model width. Every tensor is row-major. */
typedef struct attncheck_mha_v2 {
  int32_t size;                  /* sizeof(attncheck_mha_v2) as the checker was built; later versions only append fields */
  int32_t dtype;                 /* of every tensor but the masks and the weights */
  int32_t batch, q_len, kv_len;  /* B, Tq, Tk */
  int32_t d_model, heads, kv_heads, d_k, d_v;   /* D, H, H_kv, dk, dv; query head h reads KV head h / (H / H_kv) */
  const void *x_q;               /* [B][Tq][D], the queries' inputs */
  const void *x_kv;              /* [B][Tk][D], the keys' and values' inputs; the same pointer as x_q for self-attention */
  const void *w_q, *w_k, *w_v;   /* [D][H*dk], [D][H_kv*dk], [D][H_kv*dv], row-major: Q = x_q w_q + b_q; head h is columns h*dk .. h*dk + dk - 1 */
  const void *b_q, *b_k, *b_v;   /* [H*dk], [H_kv*dk], [H_kv*dv], or NULL: bias-free (D2L) */
  const void *w_o;               /* [H*dv][D]: out = concat_h(head_h) w_o + b_o, head h in rows h*dv .. h*dv + dv - 1 */
  const void *b_o;               /* [D] or NULL */
  const uint8_t *allow;          /* as in attncheck_problem_v2, and so are the next six */
  const int32_t *kv_lens;
  int32_t causal, window_left, window_right;
  double scale;                  /* 0 = 1/sqrt(d_k) */
  void *out;                     /* [B][Tq][D] */
  float *weights;                /* [B][H][Tq][Tk] (double for F64): each head's attention weights; NULL = not asked */
} attncheck_mha_v2;
int32_t attncheck_mha_forward_v2(const attncheck_mha_v2 *m);   /* with ATTNCHECK_CAP_MHA; 0 = ok */

/* ---- Restrictions: a kernel that takes less than its claims say (causal self-attention only, the
 * default scale only, some head widths) says so with the optional export attncheck_restrictions,
 * these bits, and is sent only problems inside them; a refusal inside them is still a finding. With
 * ATTNCHECK_ONLY_WITHIN_LIMITS it exports attncheck_limits_v2 too. Any ABI version may export them. */
enum {                                        /* bits of attncheck_restrictions() */
  ATTNCHECK_ONLY_CAUSAL = 1u << 0,            /* every call causal; with neither alignment below, Tq = Tk */
  ATTNCHECK_ONLY_LOWER_RIGHT = 1u << 1,       /* a causal call is lower-right (causal 2), never upper-left */
  ATTNCHECK_ONLY_UPPER_LEFT = 1u << 2,        /* a causal call is upper-left (causal 1), never lower-right */
  ATTNCHECK_ONLY_SQUARE = 1u << 3,            /* Tq = Tk */
  ATTNCHECK_ONLY_SELF_ATTENTION = 1u << 4,    /* a layer call's keys and values come from x_q (x_kv is x_q) */
  ATTNCHECK_ONLY_DEFAULT_SCALE = 1u << 5,     /* scale 0: 1/sqrt(d_k) */
  ATTNCHECK_ONLY_EQUAL_HEAD_DIMS = 1u << 6,   /* d_k = d_v */
  ATTNCHECK_ONLY_LAYER_HEAD_WIDTH = 1u << 7,  /* a layer call has d_k = d_v = D / H and its four biases all or none */
  ATTNCHECK_ONLY_WITHIN_LIMITS = 1u << 8      /* the shapes attncheck_limits_v2 gives */
};
uint32_t attncheck_restrictions(void);
typedef struct attncheck_limits {
  int32_t size;                                          /* sizeof(attncheck_limits) as the checker was built */
  int32_t max_batch, max_heads, max_q_len, max_kv_len;   /* the largest B, H, Tq, Tk; 0 = no limit */
  int32_t head_dim_multiple, max_head_dim;               /* d_k and d_v are multiples of this and at most that; 0 = any */
  int32_t head_dims[16];                                 /* or one of these widths: 0 ends the list (an empty list: any) */
} attncheck_limits;
void attncheck_limits_v2(attncheck_limits *limits);      /* fills what it limits, leaves the rest 0 */

#ifdef __cplusplus
}
#endif

#endif
