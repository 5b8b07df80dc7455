// Claim: dV of a key is the sum of the dO rows that see it, each weighted by its weight in the
// forward: dV_j = sum over the query heads of j's group and their rows i of p_ij dO_i. The weights
// are the kernel's own forward's (read through V = I), so the backward must agree with the forward
// it belongs to: within the backward's bound of dV plus what the weights may err by (the forward's
// bound of each, times |dO|). A backward that masks differently from its forward fails here.
#include <cmath>
#include <limits>

#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(BackwardDvIsTheWeightedSumOfDout, .order = 125, .catches = "causal_upper_left_in_backward", .backward = true) {
  Case<float> c = check.draw<float>({.small_only = true});
  c.empty_rows = EmptyRows::zero;
  const Shape& s = c.shape;
  SeededChooser values(check.below(std::numeric_limits<uint64_t>::max()));
  std::vector<float> dout(size_t(s.out_size()));
  for (float& x : dout) x = float(round_to(c.format, standard_normal(values)));
  const GradReference<float> gradients = reference_backward(c.problem(), dout.data());
  const Checker::Gradients<float> g = check.gradients(c, gradients, dout);

  // The forward's weights [B,H,Tq,Tk], and their bound, through V = I (or its blocks).
  const ReadWeights read = read_weights(check, c);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; h += s.H / s.kv_heads())  // the first query head of each KV head
      for (int64_t j = 0; j < s.Tk; ++j)
        for (int64_t col = 0; col < s.dv; ++col) {
          const size_t at = size_t(s.v_at(b, h, j) + col);
          if (!std::isfinite(gradients.dv.bound[at])) continue;
          long double sum = 0;
          double slack = gradients.dv.bound[at];
          bool checkable = true;
          for (int64_t member = h; member < h + s.H / s.kv_heads(); ++member)
            for (int64_t i = 0; i < s.Tq; ++i) {
              const size_t w = size_t(s.scores_at(b, member, i) + j);
              const double d = double(dout[size_t(s.out_at(b, member, i) + col)]);
              checkable &= std::isfinite(read.bound[w]) && std::isfinite(read.w[w]);
              sum += (long double)read.w[w] * d;
              slack += (read.bound[w] + 0x1p-60 * std::fabs(read.w[w])) * std::fabs(d);
            }
          if (!checkable) continue;
          const double difference = double(std::fabs((long double)g.dv[at] - sum));
          ATTNCHECK_REQUIRE(check, difference <= slack * (1 + 0x1p-30),
                            "dv[" + std::to_string(b) + "," + std::to_string(s.kv_head(h)) + "," + std::to_string(j) + "," +
                                std::to_string(col) + "] = " + show(g.dv[at]) +
                                ", but the forward's weights give sum_i p_ij dO_i = " + show(double(sum)) + " (off by " +
                                show(difference) + ", allowed " + show(slack) + ")\n" + describe(c));
        }
}

}  // namespace attncheck::properties
