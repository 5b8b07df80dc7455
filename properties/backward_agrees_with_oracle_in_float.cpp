// Claim: in float, the backward's gradients dq, dk and dv agree with the oracle's exact ones within
// the bound of a correct backward and pass the precision gate, on every generated case (every mask,
// window, soft-cap, grouped KV heads and format the kernel takes), given the exact forward out and
// lse rounded to their formats, as FlashAttention's backward receives them. Small cases only: dK and
// dV sum over every row, so the oracle computes them all.
#include "attncheck/agrees_with_oracle_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(BackwardAgreesWithOracleInFloat, .order = 15, .catches = "dk_scale_missing", .backward = true) {
  backward_agrees<float>(check);
}

}  // namespace attncheck::properties
