// Other ways to compute the multi-head attention layer (layer.hpp), and its planted bugs: the
// layer's counterpart of variant.hpp. The correct variants differ from mha_forward in layout and
// packing only, and reuse its steps (mha.hpp) and attention() wherever they do not differ; each
// planted bug is one misread input or one wrong step. impl/variants/layer_plugin.cpp exports each
// as a plugin of the layer alone.
#pragma once

#include <vector>

#include "attncheck/layer.hpp"

namespace attncheck {

// A planted bug of the layer, named after the real one it imitates.
enum class LayerMutation {
  none,
  heads_split_dk_major,  // view(B, T, dk, H) for view(B, T, H, dk): the head and width axes swapped (head g takes columns g, g +
                         // H, ...), merged back alike (hyunwoongko/transformer 15's view-order trap)
  heads_merged_untransposed,  // [B,H,Tq,dv] reshaped to [B,Tq,H dv] with no permute first (jsbaan/transformer-from-scratch PR 6)
  w_q_transposed,             // w_q read as stored [H dk][D], hidden while D == H dk; other shapes compute correctly
                              // (rasbt/LLMs-from-scratch 857)
  q_bias_dropped,      // b_q never added: the query bias of a fused QKV path left out (TensorRT-LLM 232, qkv_bias never passed)
  out_bias_dropped,    // b_o never added: an out_proj built without its bias (opacus PR 20)
  scale_from_d_model,  // default scale 1/sqrt(D) for 1/sqrt(dk) (omihub777/ViT-CIFAR PR 11, dfdx 171)
  padding_mask_polarity_of_mha,     // key lengths made a key_padding_mask (true = padding) and passed as SDPA's attn_mask (true =
                                    // attend) (rasbt/LLMs-from-scratch 1061)
  softmax_over_queries_in_columns,  // in UDL's D x N layout, the softmax of K^T Q taken along its rows: over the queries
                                    // (PyTorch-NLP 2, softmax on the wrong dim)
  weights_averaged_over_heads,  // the returned weights the mean over the heads, nn.MultiheadAttention's average_attn_weights=True
                                // default (pytorch 47583, PR 70055)
  kv_heads_from_query_heads,  // GQA's KV heads tiled (repeat) for repeat_interleave: query head h reads KV head h % H_kv (onnx PR
                              // 7274)
  self_attention_path_drops_padding,  // a self-attention fast path (x_kv is x_q) that loses the key lengths: PyTorch's
                                      // fast path taking padding through nested tensors (pytorch 86120; 97409, its
                                      // masks mishandled); cross-attention, the slow path, is right
};

// How the layer is computed. The mutants of the misread inputs live in builtin; d2l and udl carry
// the steps the others get wrong.
enum class LayerVariant {
  builtin,     // mha_forward's steps as they are
  d2l,         // Dive into Deep Learning's MultiHeadAttention (bias-free when the biases are null): row
               // layout, the heads split by transpose_qkv (reshape [B,T,H,d], permute (0,2,1,3)) and
               // merged by transpose_output, its inverse, each a reshape and a permute
  udl,         // Understanding Deep Learning's D x N column layout throughout: X^T, Q^T = w_q^T X^T + b_q,
               // scores K_h^T Q_h [Tk,Tq] softmaxed per column (over the keys), head outputs V_h W,
               // out^T = w_o^T [heads] + b_o, transposed back to [B,Tq,D] at the boundary
  packed_qkv,  // PyTorch's in_proj_weight: one packed weight [D][H dk + H_kv dk + H_kv dv] (w_q, w_k and
               // w_v side by side), one product per input (x_q's gives Q, x_kv's K and V; one product
               // for self-attention), sliced into Q, K and V
};

// A named correct variant: a checker must never flag its plugin.
struct NamedLayerVariant {
  const char* name;
  LayerVariant variant;
};
const std::vector<NamedLayerVariant>& correct_layer_variants();  // d2l, udl, packed_qkv

// The variant a planted bug lives in: d2l for the two head reshapes, udl for the column softmax,
// builtin for the others (which run in every variant).
LayerVariant layer_mutant_home(LayerMutation mutation);

// The layer computed the variant's way with the planted bug: out [B,Tq,D] and, when asked,
// weights [B,H,Tq,Tk]. The layer must be well formed (layer_error empty). Throws
// std::invalid_argument for a bug of a step the variant does not have (the head reshapes outside
// d2l, the column softmax outside udl).
template <class T>
void mha_variant(const Layer<T>& layer, const LayerResult<T>& result, LayerVariant variant,
                 LayerMutation mutation = LayerMutation::none);

}  // namespace attncheck
