// Other ways to compute attention: correct variants that differ from the built-in implementation
// in every freedom the contract leaves (summation order, FMA, accumulation precision, online
// softmax, reciprocal, exp2), and planted bugs. The bound must hold for the first and fail for
// the second; the mutant catalog builds its plugins from the same kernel.
#pragma once

#include <cstdint>

#include "attncheck/contract.hpp"

namespace attncheck {

// A planted bug, named after the real one it imitates (docs/error-bound.md lists them).
enum class Mutation {
  none,
  element_off_1e3,      // one output element off by 1e-3 relative
  model_width_scale,    // 1/sqrt(H dk) instead of 1/sqrt(dk)
  causal_swapped,       // upper-left and lower-right exchanged
  nan_element,          // one output element NaN
  bf16_weights,         // weights rounded to bfloat16 before the weighted sum (two-pass form)
  approx_exp,           // an exp with about 1e-3 relative error
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
  Mutation mutation = Mutation::none;
};

// The contract's attention computed the variant's way: Q [B,H,Tq,dk], K [B,H,Tk,dk],
// V [B,H,Tk,dv], bias [B,H,Tq,Tk] in; out [B,H,Tq,dv] out (weights and lse are not written).
template <class T>
void variant_attention(const Problem<T>& problem, T* out, const Variant& variant);

}  // namespace attncheck
