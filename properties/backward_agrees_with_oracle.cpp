// Claim: the backward's gradients dq, dk and dv agree with the oracle's exact ones within the bound
// of a correct backward and pass the precision gate, on every generated case (every mask, window,
// soft-cap, grouped KV heads and format the kernel takes), given the exact forward out and lse
// rounded to their formats, as FlashAttention's backward receives them. Small cases only: dK and
// dV sum over every row, so the oracle computes them all.
#include "attncheck/property.hpp"

namespace attncheck::properties {

// With `softcap`, a soft-cap that bites (1, 2 or 5, on scores of about that size), so that the
// derivative 1 - tanh^2 is far from 1 in every case, not only in the quarter the generator caps.
template <class T>
void backward_agrees(Checker& check, bool softcap = false) {
  Case<T> c = check.draw<T>({.small_only = true});
  c.empty_rows = EmptyRows::zero;  // the backward's contract: an empty row gives dq 0
  if (softcap) c.softcap = check.one_of({1.0, 2.0, 5.0});
  // dout [B,H,Tq,dv]: standard normal values of the case's format, from one seeded stream.
  SeededChooser values(check.below(std::numeric_limits<uint64_t>::max()));
  std::vector<T> dout(size_t(c.shape.out_size()));
  for (T& x : dout) x = T(round_to(c.format, standard_normal(values)));
  const GradReference<T> reference = reference_backward(c.problem(), dout.data());
  require_gradients(check, c, check.gradients(c, reference, dout), reference, dout, "the backward agrees with the oracle");
}

ATTNCHECK_PROPERTY(BackwardAgreesWithOracleInFloat, .order = 15, .catches = "dk_scale_missing", .backward = true) {
  backward_agrees<float>(check);
}

// The same through a soft-cap that bites.
ATTNCHECK_PROPERTY(BackwardThroughASoftCap, .order = 16, .catches = "softcap_derivative_missing", .backward = true,
                   .needs = ATTNCHECK_CAP_SOFTCAP) {
  backward_agrees<float>(check, true);
}

ATTNCHECK_PROPERTY(BackwardAgreesWithOracleInDouble, .order = 175, .catches = "dv_indexed_with_dk", .double_precision = true,
                   .backward = true) {
  backward_agrees<double>(check);
}

}  // namespace attncheck::properties
