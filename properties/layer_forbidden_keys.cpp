// Claim: a key no query may see cannot change the layer's output: its input row of x_kv, through
// w_k and w_v, reaches only its own key and value, and those carry weight 0. The layer is taken as
// cross-attention (x_kv a copy of x_q), key Tk - 1 of batch 0 is made padding (its key length, or
// its column of the allow mask), and its input row replaced by large finite values: every output
// keeps its bits.

#include "attncheck/layer_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(LayerForbiddenKeysCannotChangeOutputs, .order = 320, .catches = "padding_mask_polarity_of_mha",
                   .needs_one_of = ATTNCHECK_CAP_KV_LENS | ATTNCHECK_CAP_ALLOW, .layer = true) {
  LayerCase<float> c = draw_layer<float>(check).as_cross_attention();
  const Shape& h = c.shape.heads;
  const int64_t j = h.Tk - 1;
  if (check.claims(ATTNCHECK_CAP_KV_LENS)) {
    if (c.key_lengths.empty()) c.key_lengths.assign(size_t(h.B), int32_t(h.Tk));
    c.key_lengths[0] = std::min<int32_t>(c.key_lengths[0], int32_t(j));
  } else {
    if (c.allow.empty()) c.allow.assign(size_t(h.allow_size()), 1);
    for (int64_t i = 0; i < h.Tq; ++i) c.allow[size_t(h.allow_at(0, i) + j)] = 0;
  }
  const std::vector<float> before = check.run_layer(c);
  LayerCase<float> poisoned = c;
  const double big = check.one_of({1e3, -1e3, 3e4});
  for (int64_t d = 0; d < c.shape.D; ++d)
    poisoned.x_kv[size_t(c.shape.x_kv_at(0, j) + d)] = float(round_to(c.format, d % 2 ? big : -big / 3));
  const std::vector<float> after = check.run_layer(poisoned);
  for (size_t at = 0; at < before.size(); ++at)
    ATTNCHECK_REQUIRE(check, unchanged(before[at], after[at]),
                      "out element " + std::to_string(at) + " ([b,i,d] with D = " + std::to_string(c.shape.D) + ") moved from " +
                          show(before[at]) + " to " + show(after[at]) + " when the input row of key " + std::to_string(j) +
                          " of batch 0, which no query may see, changed\n" + describe(poisoned));
}

}  // namespace attncheck::properties
