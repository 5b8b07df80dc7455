// Claim: a head's attention weights change only with its own projections: doubling the columns of
// w_q (and b_q) that belong to one query head leaves every other head's weights with their bits.

#include "attncheck/layer_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(LayerHeadWeightsChangeOnlyWithTheirOwnProjections, .order = 340, .catches = "weights_averaged_over_heads",
                   .needs = ATTNCHECK_CAP_MHA_WEIGHTS, .layer = true) {
  const LayerCase<float> c = draw_layer<float>(check, {.min_heads = 2});
  const LayerShape& s = c.shape;
  const Shape& h = s.heads;
  const int64_t changed = int64_t(check.below(uint64_t(h.H)));
  LayerCase<float> d = c;
  for (int64_t r = 0; r < s.D; ++r)
    for (int64_t x = 0; x < h.dk; ++x) d.w_q[size_t(r * s.q_width() + s.q_col(changed) + x)] *= 2;  // exact
  for (int64_t x = 0; x < h.dk && !d.b_q.empty(); ++x) d.b_q[size_t(s.q_col(changed) + x)] *= 2;
  std::vector<float> before, after;
  check.run_layer(c, &before);
  check.run_layer(d, &after);
  std::vector<size_t> others;  // the weights of every head but the changed one
  for (int64_t b = 0; b < h.B; ++b)
    for (int64_t hh = 0; hh < h.H; ++hh)
      for (int64_t at = h.scores_at(b, hh, 0); hh != changed && at < h.scores_at(b, hh, 0) + h.Tq * h.Tk; ++at)
        others.push_back(size_t(at));
  // A kernel whose answers vary between identical calls is not held to bits (answers_vary).
  auto weights_of = [&](const LayerCase<float>& x) {
    std::vector<float> w;
    check.run_layer(x, &w);
    return w;
  };
  if (!keeps_bits(before, after, others) &&
      answers_vary([&] { return weights_of(c); }, before, [&] { return weights_of(d); }, after, others))
    return;
  for (int64_t b = 0; b < h.B; ++b)
    for (int64_t hh = 0; hh < h.H; ++hh) {
      if (hh == changed) continue;
      for (int64_t at = h.scores_at(b, hh, 0); at < h.scores_at(b, hh, 0) + h.Tq * h.Tk; ++at)
        ATTNCHECK_REQUIRE(check, unchanged(before[size_t(at)], after[size_t(at)]),
                          "weights[" + std::to_string(b) + "," + std::to_string(hh) + "," +
                              std::to_string((at - h.scores_at(b, hh, 0)) / h.Tk) + "," + std::to_string(at % h.Tk) +
                              "] of head " + std::to_string(hh) + " moved from " + show(before[size_t(at)]) + " to " +
                              show(after[size_t(at)]) + " when only head " + std::to_string(changed) +
                              "'s columns of w_q doubled\n" + describe(d));
    }
}

}  // namespace attncheck::properties
