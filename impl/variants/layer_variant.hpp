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
#define ATTNCHECK_LAYER_BUG(name) name,
#include "planted_bugs.def"
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
