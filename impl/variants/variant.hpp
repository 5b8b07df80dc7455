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
  nan_row_zeroed,             // the empty-row guard l > 0 ? acc / l : 0 of an online softmax: a NaN or +inf
                              // score makes l NaN, NaN > 0 is false, and the row comes out 0 (lse -inf)
  max_minus_infinity_nan,     // a row empty by its scores alone (permitted keys, each scoring -inf: an inf in
                              // q or k) taken through the softmax: m = -inf, exp(-inf + inf) = NaN
  multiply_forbidden_values,  // forbidden values multiplied by weight 0: NaN or inf in padding leaks
  shared_kv_heads,            // every head reads head 0's keys and values (a stride bug)
  bf16_weights,               // weights rounded to bfloat16 before the weighted sum (two-pass form)
  approx_exp,                 // an exp with about 1.7e-3 relative error
  element_off_1e3,            // one output element off by 1e-3 relative
  nan_element,                // one output element NaN
  // Tile bugs, each wrong only from some size on (the size ladder's prey):
  last_partial_key_tile_dropped,   // key tiles counted as Tk / 128, rounded down, once Tk > 128: the last
                                   // partial tile is never visited (jax 27224, pytorch 159247)
  split_kv_merge_unscaled,         // split-KV (Tk >= 320, chunks of 256) merging partials by adding acc_s and
                                   // l_s without the rescale exp(m_s - m) (flashinfer 50, 58)
  causal_tiles_assume_equal_size,  // causal tile skipping with query tiles of 64 and key tiles of 32 that
                                   // visits key tiles kt <= t (plus the alignment offset in tiles) for
                                   // query tile t, as if both tiles had one size: wrong for Tq > 32
  head_dim_tail_dropped,           // a wide-head path (dk > 64) that takes q.k in chunks of 32 and drops
                                   // the last dk % 32 dims (triton 621, head dim hardcoded 64)
  decode_path_ignores_mask,        // the decode path (Tq 1) ignores the allow mask and key lengths; causal
                                   // still applies
  running_sum_fp16_long_context,   // past 1024 keys the running normalizer l is kept in binary16, rounded
                                   // at every update, key by key (llama.cpp 13975: fp16 accumulators in
                                   // long contexts)
  // Bugs of the features beyond ABI v1 (grouped KV heads, sliding windows, soft-caps):
  gqa_heads_interleaved,    // query head h reads KV head h % H_kv: h0,h1,h0,h1 instead of h0,h0,h1,h1 (onnx PR 7274)
  gqa_group_power_of_two,   // group size taken as the largest power of two <= H / H_kv, the KV head then
                            // clamped to the last: right only for power-of-two groups (llama.cpp 19115)
  window_exclusive,         // window bounds read as exclusive, one key short on each bounded side
                            // (FlashAttention's inclusive convention misread: transformers 39408)
  window_excludes_current,  // the diagonal key j = i + Tk - Tq left out of a window (onnxruntime 25927)
  window_right_dropped,     // the window's right bound ignored (jax PR 39576)
  window_upper_left,        // the window centred on j = i instead of i + Tk - Tq (ffpa-attn 300: causal and
                            // window aligned differently); wrong only when Tq != Tk
  softcap_after_mask,       // soft-cap applied after masking: a masked key scores cap tanh(-inf / cap) = -cap
                            // and leaks (flash-attention 1025)
  softcap_s_tanh_s,         // s tanh(s) instead of cap tanh(s / cap) (flash-attention 2402)
  softcap_ignored,          // the soft-cap silently ignored (sglang 33915, vllm-metal 665)
  lse_max_left_out,         // the log-sum-exp without the row maximum: log l alone (the list)
  lse_empty_row_zero,       // an empty row's log-sum-exp 0 instead of -inf (pytorch 134650)
  kv_lens_batch_max,        // every sequence read to the batch's longest key length (flash-attention 1192, 1455)
  // Bugs of low precision (wrong in any format, and what real fp16 and bf16 kernels get wrong):
  output_accumulator_fp16,  // the output accumulator kept in binary16, rounded at every key (llama.cpp 13975)
  scores_fp16,              // q . k stored in binary16 before scaling: past 65504 it is inf (pytorch 60939,
                            // llama.cpp 6646)
  softmax_bf16,             // exp and the running normalizer kept in bfloat16, rounded at every key (the
                            // softmax computed in the input format)
  scores_in_format,         // in f16 and bf16, each score scale q . k rounded to the format before the softmax
                            // (a math path whose matmul returns the input dtype: PyTorch SDPA's bf16 scores)
  double_in_float,          // a float64 call computed in float32 throughout, rounded back (an eager path that
                            // upcasts to float32 whatever the input: transformers' softmax(dtype=float32))
  // Bugs of dropout (the contract: after the softmax, each weight kept with probability 1 - p and
  // divided by 1 - p):
  dropout_before_softmax,                 // dropped scores set to -inf before the softmax: the weights renormalized
                                          // over the survivors, not rescaled
  dropout_no_rescale,                     // kept weights not divided by 1 - p (inference-style dropout in training)
  dropout_rescaled_by_keep,               // kept weights multiplied by 1 - p instead of divided by it
  dropout_p_swapped,                      // weights kept with probability p, not 1 - p (p read as the keep rate)
  dropout_seed_ignored,                   // one fixed stream whatever the seed
  dropout_mask_shared_across_heads,       // every batch and head drops the same weights (the mask indexed by (i, j) alone)
  dropout_on_output,                      // dropout applied to the output elements instead of the weights
  keep_mask_unwritten_at_forbidden_keys,  // the keep mask's bytes of forbidden keys left as they were
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
