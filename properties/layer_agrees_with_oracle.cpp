// Claim: the multi-head layer is attention per head between projections: its out (and each
// head's weights, when it returns them) agree with the layer's oracle, which composes the exact
// projections, the oracle's attention per head, the merge and the output projection.

#include "attncheck/layer_support.hpp"

namespace attncheck::properties {

template <class T>
void layer_agrees(Checker& check) {
  const LayerCase<T> c = draw_layer<T>(check);
  const bool with_weights = check.claims(ATTNCHECK_CAP_MHA_WEIGHTS);
  std::vector<T> weights;
  const std::vector<T> out = check.run_layer(c, with_weights ? &weights : nullptr);
  require_layer_agreement(check, c, out, with_weights ? &weights : nullptr, layer_reference(c.layer()),
                          "the layer against its oracle");
}

ATTNCHECK_PROPERTY(LayerAgreesWithOracle, .order = 300, .catches = "heads_split_dk_major", .layer = true) {
  layer_agrees<float>(check);
}

ATTNCHECK_PROPERTY(LayerAgreesWithOracleInDouble, .order = 301, .catches = "scale_from_d_model", .double_precision = true,
                   .layer = true) {
  layer_agrees<double>(check);
}

}  // namespace attncheck::properties
