// Claim: each row of weights sums to one over the keys (the right axis), every weight lies in
// [0, 1], and a forbidden key's weight is exactly 0.

#include <cmath>

#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(RowsSumToOne, .order = 70, .catches = "softmax_over_queries") {
  // V = I makes dv = Tk: a large case would cost Tk times a pass over it.
  const Case<float> c = with_identity_values(check.draw<float>({.small_only = true}));
  const std::vector<float> w = check.run(c);  // [B,H,Tq,Tk] through V = I
  const Reference ref = reference(c.problem());
  const Shape& s = c.shape;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        const size_t row = size_t(s.out_at(b, h, i));  // dv = Tk: out is the weights [B,H,Tq,Tk]
        const std::string where = "row [" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) + "]";
        // A row of special values (NaN inputs, the nan policy) or outside float's range has no sum to check.
        bool checkable = true, carries_weight = false;
        for (int64_t j = 0; j < s.Tk; ++j) {
          checkable &= std::isfinite(ref.out.bound[row + j]) && std::isfinite(ref.out.exact[row + j]);
          carries_weight |= ref.out.exact[row + j] != 0;
        }
        if (!checkable) continue;
        // A row with no permitted key under --empty-rows mean weighs every key alike, by its policy.
        bool mean_row = c.empty_rows == EmptyRows::mean;
        for (int64_t j = 0; j < s.Tk; ++j) mean_row &= !c.permits(b, i, j);
        double sum = 0, sum_bounds = 0;
        for (int64_t j = 0; j < s.Tk; ++j) {
          ATTNCHECK_REQUIRE(check, c.permits(b, i, j) || mean_row || w[row + j] == 0,
                            "forbidden key " + std::to_string(j) + " of " + where + " has weight " +
                                show(w[row + j]) + "\n" + describe(c));
          ATTNCHECK_REQUIRE(check, w[row + j] >= -ref.out.bound[row + j] && w[row + j] <= 1 + ref.out.bound[row + j],
                            "weight " + std::to_string(j) + " of " + where + " is " + show(w[row + j]) +
                                ", outside [0, 1]\n" + describe(c));
          sum += w[row + j];
          sum_bounds += ref.out.bound[row + j];
        }
        if (carries_weight)  // else an empty row: all zero, as checked above
          ATTNCHECK_REQUIRE(check, std::fabs(sum - 1) <= sum_bounds, where + " sums to " + show(sum) +
                                                                   " over the keys, not 1\n" + describe(c));
      }
}

}  // namespace attncheck::properties
