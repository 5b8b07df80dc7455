// Claim: the backward's gradients agree with the oracle's, as in BackwardAgreesWithOracleInFloat,
// through a soft-cap that bites (1, 2 or 5) in every case: the derivative 1 - tanh^2 is taken.
#include "attncheck/agrees_with_oracle_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(BackwardThroughASoftCap, .order = 16, .catches = "softcap_derivative_missing", .backward = true,
                   .needs = ATTNCHECK_CAP_SOFTCAP) {
  backward_agrees<float>(check, true);
}

}  // namespace attncheck::properties
