// Claim: the weight a row's sink takes is exp(sink_h - lse), and the row's key weights sum to 1
// minus it: the kernel's own weights (read through V = I) and its own lse tell the same softmax.
#include <cmath>

#include "attncheck/sinks_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(SinkTakesTheRestOfTheWeight, .order = 245, .catches = "lse_without_sink",
                   .needs = ATTNCHECK_CAP_SINKS | ATTNCHECK_CAP_LSE) {
  // V = I makes dv = Tk: a large case would cost Tk times a pass over it.
  const Case<float> c = with_sinks(check, check.draw<float>({.small_only = true}));
  if (c.empty_rows != EmptyRows::zero || c.lse_empty != LseEmpty::ninf) return;  // an empty row's policy, not the sink's share
  const ReadWeights read = read_weights(check, c);                               // [B,H,Tq,Tk]
  std::vector<float> lse;
  check.run(c, lse);
  const Reference ref = reference(c.problem());
  const Shape& s = c.shape;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        const size_t row = size_t(s.scores_at(b, h, i)), at = size_t(s.lse_at(b, h, i));
        // A row of special values (NaN inputs) or outside float's range has no sum to check.
        bool checkable = std::isfinite(ref.lse.bound[at]) && std::isfinite(double(ref.lse.exact[at]));
        double sum = 0, sum_bounds = 0;
        for (int64_t j = 0; j < s.Tk; ++j) {
          checkable &= std::isfinite(read.bound[row + j]) && std::isfinite(double(read.exact[row + j]));
          sum += read.w[row + j];
          sum_bounds += read.bound[row + j];
        }
        if (!checkable) continue;
        // The sink's weight from the kernel's lse, within exp(sink - lse) (e^b - 1) of the exact one
        // for an lse within b of the exact; 0 without a sink.
        const double sink = has_sink(c.problem(), h) ? std::exp(double(c.sinks[size_t(h)]) - lse[at]) : 0;
        const double allowed = sum_bounds + (sink > 0 ? sink * std::expm1(ref.lse.bound[at]) : 0) + 0x1p-50 * (1 + sink);
        ATTNCHECK_REQUIRE(check, std::fabs(sum + sink - 1) <= allowed,
                          "row [" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) +
                              "]'s key weights sum to " + show(sum) + " and its sink takes exp(sink - lse) = " + show(sink) +
                              " (lse " + show(lse[at]) + "): together " + show(sum + sink) + ", not 1 (allowed " + show(allowed) +
                              ")\n" + describe(read.calls.front()));
      }
}

}  // namespace attncheck::properties
