// Claim: out is linear in w_o and b_o: with w_o = 0 every output row is b_o exactly (0 without it),
// whatever the heads computed (0 h + b = b in any order), and the layer with its own w_o agrees
// with the oracle, so b_o is neither dropped nor added twice.

#include <cmath>

#include "attncheck/layer_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(LayerOutputProjectionZeroGivesBias, .order = 310, .catches = "out_bias_dropped", .layer = true) {
  LayerCase<float> c = draw_layer<float>(check);
  const LayerShape& s = c.shape;
  if (c.b_o.empty()) {  // the claim is about b_o: give the layer one (and zero ones to a layer whose biases are all or none)
    c.b_o.resize(size_t(s.D));
    for (int64_t d = 0; d < s.D; ++d) c.b_o[size_t(d)] = float(round_to(c.format, 0.25 * double(d + 1)));
    if (check.domain().only(ATTNCHECK_ONLY_LAYER_HEAD_WIDTH)) {
      c.b_q.assign(size_t(s.q_width()), 0.0f);
      c.b_k.assign(size_t(s.k_width()), 0.0f);
      c.b_v.assign(size_t(s.v_width()), 0.0f);
    }
  }
  require_layer_agreement(check, c, check.run_layer(c), nullptr, layer_reference(c.layer()), "the layer with its w_o");
  std::fill(c.w_o.begin(), c.w_o.end(), 0.0f);
  const std::vector<float> out = check.run_layer(c);
  const LayerReference ref = layer_reference(c.layer());
  for (int64_t r = 0; r < s.heads.B * s.heads.Tq; ++r)
    for (int64_t d = 0; d < s.D; ++d) {
      const size_t at = size_t(r * s.D + d);
      if (std::isnan(double(ref.out.exact[at]))) continue;  // a NaN head (the nan policy's empty row) times 0
      ATTNCHECK_REQUIRE(check, out[at] == c.b_o[size_t(d)],
                        "with w_o = 0, out[" + std::to_string(r / s.heads.Tq) + "," + std::to_string(r % s.heads.Tq) + "," +
                            std::to_string(d) + "] is " + show(out[at]) + ", not b_o[" + std::to_string(d) +
                            "] = " + show(c.b_o[size_t(d)]) + "\n" + describe(c));
    }
}

}  // namespace attncheck::properties
