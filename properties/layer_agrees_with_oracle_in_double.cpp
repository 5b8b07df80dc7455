// Claim: the multi-head layer is attention per head between projections: in double, its out (and
// each head's weights, when it returns them) agree with the layer's oracle, which composes the exact
// projections, the oracle's attention per head, the merge and the output projection.

#include "attncheck/layer_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(LayerAgreesWithOracleInDouble, .order = 301, .catches = "scale_from_d_model", .double_precision = true,
                   .layer = true) {
  layer_agrees<double>(check);
}

}  // namespace attncheck::properties
