// Claim: self-attention (x_kv the same pointer as x_q) is cross-attention with a copy: a kernel's
// self-attention path (a fused QKV product, a fast path) gives what its general path gives, within
// both bounds. With key lengths claimed, batch 0's last key is padding, so that a path that loses
// the padding shows.

#include "attncheck/layer_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(LayerSelfAttentionEqualsCrossWithACopy, .order = 315, .catches = "self_attention_path_drops_padding",
                   .layer = true, .leaves = ATTNCHECK_ONLY_SELF_ATTENTION) {
  LayerCase<float> c = draw_layer<float>(check);
  if (!c.self_attention) {  // the claim is about self-attention: make it one (Tk = Tq, x_kv dropped)
    c.self_attention = true;
    c.x_kv.clear();
    c.shape.heads.Tk = c.shape.heads.Tq;
    c.allow.clear();
    c.key_lengths.clear();
  }
  const Shape& h = c.shape.heads;
  if (check.claims(ATTNCHECK_CAP_KV_LENS) && h.Tk > 1) {
    if (c.key_lengths.empty()) c.key_lengths.assign(size_t(h.B), int32_t(h.Tk));
    c.key_lengths[0] = std::min<int32_t>(c.key_lengths[0], int32_t(h.Tk - 1));
  }
  const LayerCase<float> cross = c.as_cross_attention();
  const std::vector<float> self_out = check.run_layer(c), cross_out = check.run_layer(cross);
  require_close(check, c, self_out, cross_out, layer_reference(c.layer()).out, layer_reference(cross.layer()).out,
                "self-attention against cross-attention with a copy of x_q");
}

}  // namespace attncheck::properties
