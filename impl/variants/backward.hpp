// Other ways to compute attention's backward pass: correct variants that differ from the built-in
// (attention_backward) in the freedoms a backward has (P recomputed from the saved lse or by a full
// softmax, D from the forward's output or from P and dP, tiles over keys and queries, accumulation
// precision, P and dS rounded to f16 or bf16 for their products), and planted bugs, each named after
// the real one it imitates.
#pragma once

#include <cstdint>
#include <vector>

#include "attncheck/contract.hpp"

namespace attncheck {

// A planted bug of the backward pass.
enum class BackwardMutation {
  none,
#define ATTNCHECK_BACKWARD_BUG(name) name,
#include "planted_bugs.def"
};

// The freedoms a correct backward has, and an optional planted bug.
struct BackwardVariant {
  bool accumulate_double = false;  // scores, sums and gradients in double, rounded to T once
  int64_t key_tile = 0;            // 0: one tile of all keys; n > 0: key tiles of n (the outer loop), each
                                   // tile's dK and dV summed on their own, then added to the KV head's
  int64_t query_tile = 0;          // 0: one tile of all queries; n > 0: query tiles of n (the inner loop), each
                                   // row's dQ over a key tile summed on its own, then added across key tiles
  bool p_from_lse = true;          // P = exp(s - lse) from the forward's lse; else the softmax of the row's
                                   // scores (max, exp, sum, divide)
  bool d_from_out = true;          // D_i = dout_i . out_i from the forward's out; else sum_j P_ij dP_ij
  bool round_to_format = false;    // in f16 and bf16: P rounded to the format before dV = P^T dout, and dT
                                   // (dS times the soft-cap's derivative) before dQ and dK, as FlashAttention-2
                                   // feeds its bf16 matrix products while accumulating in fp32
  BackwardMutation mutation = BackwardMutation::none;
};

// A named correct backward variant.
struct NamedBackward {
  const char* name;
  BackwardVariant variant;
};
// two_pass_backward, flash_backward, double_backward, rounded_backward.
const std::vector<NamedBackward>& correct_backward_variants();

// The kernel a planted backward bug lives in: FlashAttention-2's tiled one (flash_backward) for every
// one, since the real ones were all reported against tiled or fused backward kernels (FlashAttention's,
// Levanter's blocked JAX one, tokamax's, ffpa-attn's, the Triton tutorial's, PyTorch's).
BackwardVariant backward_mutant(BackwardMutation mutation);

// The gradients of L = sum(out * dout) computed the variant's way: Q [B,H,Tq,dk], K [B,H_kv,Tk,dk],
// V [B,H_kv,Tk,dv], bias [B,H,Tq,Tk], the forward's out [B,H,Tq,dv] and lse [B,H,Tq], dout [B,H,Tq,dv]
// in; dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv] out. In f16 and bf16 every gradient is
// rounded to the format once. A correct variant never reads a forbidden key's k or v.
template <class T>
void variant_backward(const Problem<T>& problem, const Grads<T>& grads, const BackwardVariant& variant);

}  // namespace attncheck
