// Claim: softmax's Jacobian has rows that sum to zero, so adding a constant to every permitted score
// of a row changes no gradient: appending a / scale to every q and 1 to every k shifts every score
// by a, the gradients of q, k (their first dk columns) and v stay the original problem's, and the
// gradient of the appended q column, scale sum_j dS_ij, is zero. A backward whose D_i is not
// dout_i . out_i leaves its score rows a non-zero sum, and fails here.
#include <cmath>
#include <limits>

#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(BackwardScoreRowsSumToZero, .order = 85, .catches = "d_from_other_output", .backward = true,
                   .widens_heads = true) {
  Case<float> c = check.draw<float>({.small_only = true});
  c.empty_rows = EmptyRows::zero;
  c.softcap = 0;  // a soft-cap bends the scores: no shift of them
  const std::optional<ShiftedCase> shift = with_scores_shifted(check, c, check.one_of({-100.0, -10.0, 10.0, 100.0, 1000.0}));
  check.classify(!shift, "no wider head in the domain");
  if (!shift) return;
  const Case<float>& shifted = shift->c;
  const Shape& s = shifted.shape;
  SeededChooser values(check.below(std::numeric_limits<uint64_t>::max()));
  std::vector<float> dout(size_t(s.out_size()));
  for (float& x : dout) x = float(round_to(c.format, standard_normal(values)));

  // The shifted problem's bound, the unshifted one's exact gradients (the same widths, 0 appended):
  // dq and dv as they are (the appended dq column is scale sum_j dS_ij = 0 in both), dk but its
  // appended column, which the shifted q's appended value makes the shifted problem's own.
  GradReference<float> expected = reference_backward(shifted.problem(), dout.data());
  const GradReference<float> original = reference_backward(shift->unshifted.problem(), dout.data());
  expected.dq.exact = original.dq.exact;
  for (int64_t row = 0; row < s.B * s.kv_heads() * s.Tk; ++row)
    for (int64_t k = 0; k + 1 < s.dk; ++k) expected.dk.exact[size_t(row * s.dk + k)] = original.dk.exact[size_t(row * s.dk + k)];
  expected.dv.exact = original.dv.exact;
  // What the original leaves unchecked (its exact NaN) the shifted one cannot hold to a value.
  for (ExactTensor* t : {&expected.dq, &expected.dk, &expected.dv})
    for (size_t n = 0; n < t->exact.size(); ++n)
      if (std::isnan(t->exact[n])) t->bound[n] = std::numeric_limits<double>::infinity();
  require_gradients(check, shifted, check.gradients(shifted, expected, dout), expected, dout,
                    "every score shifted by " + show(shift->applied));
}

}  // namespace attncheck::properties
