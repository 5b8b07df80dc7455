// Other ways to compute attention: correct variants that differ from the built-in implementation
// in every freedom the contract leaves (summation order, FMA, accumulation precision, online
// softmax, reciprocal, exp2, tiles over queries and keys, split-KV), and planted bugs. The bound
// must hold for the first and fail for the second; the mutant catalog builds its plugins from the
// same kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "attncheck/contract.hpp"

namespace attncheck {

// A planted bug, named after the real one it imitates (docs/checking.md, the mutant catalog).
enum class Mutation {
  none,
#define ATTNCHECK_FORWARD_BUG(name) name,
#include "planted_bugs.def"
};
// The freedoms a correct implementation has, and an optional planted bug.
struct Variant {
  bool accumulate_double = false;  // scores, sums and outputs in double, rounded to T once
  int64_t block = 0;               // 0: two-pass softmax; b > 0: online softmax over key tiles of b keys
  int64_t query_tile = 0;          // 0: no query tiles; q > 0: queries in tiles of q rows, each tile visiting
                                   // the key tiles up to the last key its causal mask lets any row see
  int64_t split_from = 0;          // 0: never; n > 0 (with block > 0): split-KV from Tk >= n on, each chunk
                                   // of split_chunk keys its own online pass, the partials merged at the end
  int64_t split_chunk = 0;         // the split-KV chunk, in keys; its key tiles start at the chunk's start
  bool reciprocal = false;         // multiply by 1/l instead of dividing by l
  bool pairwise = false;           // pairwise summation instead of left to right
  bool fma = false;                // dot products with fused multiply-add
  bool exp2 = false;               // exp2((s - m) log2 e), as FlashAttention computes it
  bool prescale = false;           // (c q) . k instead of c (q . k)
  bool defer_normalize = false;    // (sum_j e_j v_j) / l instead of sum_j (e_j / l) v_j
  bool flush_subnormals = false;   // flush-to-zero and denormals-are-zero on for the call (x86-64
                                   // MXCSR), as under -ffast-math or CUDA's --use_fast_math
  bool round_weights = false;      // in f16 and bf16, the weights rounded to the format before the P V product
                                   // (FlashAttention), the normalizer summed before rounding
  bool expand_kv_heads = false;    // grouped KV heads copied out to one per query head first (repeat_interleave)
  // Dropout's rescale in the two-pass form: a kept weight divided by 1 - p, or (f16, bf16) multiplied
  // by 1 / (1 - p) held in the format and the product rounded to it (PyTorch 1.13's math path);
  // else multiplied by 1 / (1 - p) in the accumulation precision.
  bool dropout_divides = false;
  bool dropout_factor_in_format = false;
  Mutation mutation = Mutation::none;
};

// The kernel a planted bug lives in: online softmax in blocks of 4 keys for the online bugs, the
// tiled kernels of correct_variants() (tiled_split_kv, tiled_causal_skipping, or key tiles of 128)
// for the tile bugs, online softmax key by key for the fp16 normalizer, the two-pass form for the
// others.
Variant mutant(Mutation mutation);

// A named correct variant: the combinations the bound and the campaign are tested against.
struct NamedVariant {
  const char* name;
  Variant variant;
};
const std::vector<NamedVariant>& correct_variants();

// The contract's attention computed the variant's way: Q [B,H,Tq,dk], K [B,H_kv,Tk,dk],
// V [B,H_kv,Tk,dv], bias [B,H,Tq,Tk] in; out [B,H,Tq,dv] out, and lse [B,H,Tq] when given: the
// final running maximum plus the log of the final normalizer, m + log l (-inf for an empty row);
// with dropout, the keep mask [B,H,Tq,Tk] when given (Philox per element, dropout.hpp): the
// two-pass form drops normalized weights, the online form the numerators of each P tile after
// l has summed them, as FlashAttention does.
template <class T>
void variant_attention(const Problem<T>& problem, T* out, const Variant& variant, T* lse = nullptr, uint8_t* keep = nullptr);

}  // namespace attncheck
