// Other ways to compute attention: correct variants that differ from the built-in implementation
// in every freedom the contract leaves (summation order, FMA, accumulation precision, online
// softmax, reciprocal, exp2), and planted bugs. The bound must hold for the first and fail for
// the second; the mutant catalog builds its plugins from the same kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "attncheck/contract.hpp"

namespace attncheck {

// A planted bug, named after the real one it imitates (docs/checking.md, the mutant catalog).
enum class Mutation {
  none,
  naive_softmax,              // exp(s) / sum exp(s) without subtracting the maximum
  softmax_over_queries,       // normalized over the query axis instead of the keys
  model_width_scale,          // 1/sqrt(H dk) instead of 1/sqrt(dk)
  no_scale,                   // scale 1
  divide_by_scale,            // q.k / scale, i.e. q.k sqrt(dk)
  explicit_scale_ignored,     // 1/sqrt(dk) whatever scale the caller gives
  forbidden_zero,             // a forbidden score set to 0 instead of -inf
  sentinel_1e4,               // forbidden score -1e4 (flashinfer issue 4267)
  sentinel_1e9,               // forbidden score -1e9
  sentinel_flt_max,           // forbidden score -FLT_MAX: a fully masked row averages every key
  causal_ignores_padding,     // with a causal mask, the allow mask and key lengths are ignored
  inverted_polarity,          // allow read as MultiheadAttention's true = blocked
  causal_swapped,             // upper-left and lower-right exchanged
  empty_row_nan,              // a fully masked row gives NaN (exp(-inf - -inf))
  online_no_rescale,          // online softmax that does not rescale the accumulator as the max grows
  online_max_clamped,         // running max set to 0 after a fully masked first block (flash-attention 2082)
  multiply_forbidden_values,  // forbidden values multiplied by weight 0: NaN or inf in padding leaks
  shared_kv_heads,            // every head reads head 0's keys and values (a stride bug)
  bf16_weights,               // weights rounded to bfloat16 before the weighted sum (two-pass form)
  approx_exp,                 // an exp with about 1.7e-3 relative error
  element_off_1e3,            // one output element off by 1e-3 relative
  nan_element,                // one output element NaN
};
// The freedoms a correct implementation has, and an optional planted bug.
struct Variant {
  bool accumulate_double = false;  // scores, sums and outputs in double, rounded to T once
  int64_t block = 0;               // 0: two-pass softmax; b > 0: online softmax over blocks of b keys
  bool reciprocal = false;         // multiply by 1/l instead of dividing by l
  bool pairwise = false;           // pairwise summation instead of left to right
  bool fma = false;                // dot products with fused multiply-add
  bool exp2 = false;               // exp2((s - m) log2 e), as FlashAttention computes it
  bool prescale = false;           // (c q) . k instead of c (q . k)
  bool defer_normalize = false;    // (sum_j e_j v_j) / l instead of sum_j (e_j / l) v_j
  bool flush_subnormals = false;   // flush-to-zero and denormals-are-zero on for the call (x86-64
                                   // MXCSR), as under -ffast-math or CUDA's --use_fast_math
  Mutation mutation = Mutation::none;
};

// The kernel a planted bug lives in: online softmax in blocks of 4 keys for the online bugs, the
// two-pass form for the others.
Variant mutant(Mutation mutation);

// A named correct variant: the combinations the bound and the campaign are tested against.
struct NamedVariant {
  const char* name;
  Variant variant;
};
const std::vector<NamedVariant>& correct_variants();

// The contract's attention computed the variant's way: Q [B,H,Tq,dk], K [B,H_kv,Tk,dk],
// V [B,H_kv,Tk,dv], bias [B,H,Tq,Tk] in; out [B,H,Tq,dv] out (weights and lse are not written).
template <class T>
void variant_attention(const Problem<T>& problem, T* out, const Variant& variant);

}  // namespace attncheck
