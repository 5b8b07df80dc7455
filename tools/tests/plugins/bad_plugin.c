/* A plugin that misbehaves in one way, chosen at build time by BAD_<name> (tools/tests/CMakeLists.txt):
 * the checker must report each as a finding and survive. Otherwise it outputs v's first row. */
#include <fenv.h>
#include <stdlib.h>
#include <string.h>

#include "attncheck/plugin.h"

int32_t attncheck_abi_version(void) { return ATTNCHECK_ABI_VERSION; }

int32_t attncheck_forward_f32(const attncheck_problem *p) {
  /* p: q [B][H][Tq][dk], k [B][H][Tk][dk], v [B][H][Tk][dv], out [B][H][Tq][dv]. */
  const size_t n_out = (size_t)p->batch * p->heads * p->q_len * p->d_v;
  const size_t n_k = (size_t)p->batch * p->heads * p->kv_len * p->d_k;
  float *out = (float *)p->out;
  volatile float sink = 0;
  for (size_t n = 0; n < n_out; ++n) out[n] = ((const float *)p->v)[n % (size_t)p->d_v];
#if defined(BAD_crash) /* crash: a null pointer */
  *(volatile int *)0 = 1;
#elif defined(BAD_abort) /* abort */
  abort();
#elif defined(BAD_hang) /* hang */
  for (;;) sink += 1;
#elif defined(BAD_write_past_end) /* write one element past the end of out (inside the canary slack or the guard page) */
  out[n_out] = 1;
#elif defined(BAD_write_before_start) /* write before the start of out */
  out[-1] = 1;
#elif defined(BAD_read_past_end) /* read past the end of k, beyond the 64-byte alignment slack */
  sink = ((const float *)p->k)[n_k + 16];
#elif defined(BAD_write_into_input) /* write into an input */
  ((float *)p->q)[0] = 0;
#elif defined(BAD_refuse) /* refuse a valid problem */
  return 7;
#elif defined(BAD_exit) /* exit the process */
  exit(3);
#elif defined(BAD_rounding) /* change the rounding mode of the whole process and leave it so */
  fesetround(FE_TOWARDZERO);
#elif defined(BAD_write_far_past_end) /* write 20 KiB past the end of out: in its own guard, not some other buffer's */
  out[n_out + 5120] = 1;
#elif defined(BAD_write_far_outside) /* write 1 TiB before out: outside every buffer */
  *(volatile float *)((char *)out - ((size_t)1 << 40)) = 1;
#endif
  (void)sink;
  (void)n_k;
  return 0;
}
