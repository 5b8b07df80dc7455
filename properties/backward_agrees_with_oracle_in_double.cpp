// Claim: in double, the backward's gradients dq, dk and dv agree with the oracle's exact ones within
// the bound of a correct backward and pass the precision gate, on every generated case (every mask,
// window, soft-cap, grouped KV heads and format the kernel takes), given the exact forward out and
// lse rounded to their formats, as FlashAttention's backward receives them. Small cases only: dK and
// dV sum over every row, so the oracle computes them all.
#include "attncheck/agrees_with_oracle_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(BackwardAgreesWithOracleInDouble, .order = 175, .catches = "dv_indexed_with_dk", .double_precision = true,
                   .backward = true) {
  backward_agrees<double>(check);
}

}  // namespace attncheck::properties
