/* attncheck plugin ABI v1: the C interface through which attncheck checks an attention kernel.
 * This struct layout and these symbol names are fixed: users compile against them.
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

int32_t attncheck_abi_version(void);                        /* returns 1 */
int32_t attncheck_forward_f32(const attncheck_problem *p);  /* required; 0 = ok, non-zero = refused */
int32_t attncheck_forward_f64(const attncheck_problem *p);  /* optional */

#ifdef __cplusplus
}
#endif

#endif
