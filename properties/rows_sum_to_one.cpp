// Claim: each row of weights sums to one over the keys (the right axis), every weight lies in
// [0, 1], and a forbidden key's weight is exactly 0.

#include <cmath>

#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(RowsSumToOne, .order = 70, .catches = "softmax_over_queries") {
  // V = I makes dv = Tk: a large case would cost Tk times a pass over it.
  const Case<float> c = check.draw<float>({.small_only = true});
  const ReadWeights read = read_weights(check, c);  // [B,H,Tq,Tk] through V = I (or its blocks)
  const std::vector<float>& w = read.w;
  const Shape& s = c.shape;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        const size_t row = size_t(s.scores_at(b, h, i));
        const std::string where = "row [" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) + "]";
        // A row of special values (NaN inputs, the nan policy) or outside float's range has no sum to check.
        bool checkable = true, carries_weight = false;
        for (int64_t j = 0; j < s.Tk; ++j) {
          checkable &= std::isfinite(read.bound[row + j]) && std::isfinite(double(read.exact[row + j]));
          carries_weight |= read.exact[row + j] != 0;
        }
        if (!checkable) continue;
        // An empty row under --empty-rows mean weighs every key alike, by its policy: one with no
        // permitted key, or whose permitted keys a -inf bias all forbids (the oracle's empty).
        const bool mean_row = c.empty_rows == EmptyRows::mean && exact_row(c.problem(), b, h, i).empty;
        const std::string shown = describe(read.calls.front());
        double sum = 0, sum_bounds = 0;
        for (int64_t j = 0; j < s.Tk; ++j) {
          ATTNCHECK_REQUIRE(
              check, c.permits(b, i, j) || mean_row || w[row + j] == 0,
              "forbidden key " + std::to_string(j) + " of " + where + " has weight " + show(w[row + j]) + "\n" + shown);
          ATTNCHECK_REQUIRE(
              check, w[row + j] >= -read.bound[row + j] && w[row + j] <= 1 + read.bound[row + j],
              "weight " + std::to_string(j) + " of " + where + " is " + show(w[row + j]) + ", outside [0, 1]\n" + shown);
          sum += w[row + j];
          sum_bounds += read.bound[row + j];
        }
        if (carries_weight)  // else an empty row: all zero, as checked above
          ATTNCHECK_REQUIRE(check, std::fabs(sum - 1) <= sum_bounds,
                            where + " sums to " + show(sum) + " over the keys, not 1\n" + shown);
      }
}

}  // namespace attncheck::properties
