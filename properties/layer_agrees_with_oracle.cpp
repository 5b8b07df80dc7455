// Claim: the multi-head layer is attention per head between projections: in float, its out (and
// each head's weights, when it returns them) agree with the layer's oracle, which composes the exact
// projections, the oracle's attention per head, the merge and the output projection.

#include "attncheck/layer_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(LayerAgreesWithOracle, .order = 300, .catches = "heads_split_dk_major", .layer = true) {
  layer_agrees<float>(check);
}

}  // namespace attncheck::properties
