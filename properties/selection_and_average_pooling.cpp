// Claim: one logit far above the rest selects its value; equal logits give the mean of the
// permitted values.

#include <algorithm>
#include <cmath>

#include "attncheck/property.hpp"

namespace attncheck::properties {

// Selection and pooling on one head without masks (but the causal one a causal-only kernel always
// has): q = 0 (all logits equal) gives the mean of the permitted values; q = e_0 with one key's k =
// big e_0 gives that key's value (key 0 under a causal mask, which every row with a key sees).
ATTNCHECK_PROPERTY(SelectionAndAveragePooling, .order = 100, .catches = "naive_softmax") {
  Case<float> c = check.draw<float>({1, 1, 24, 24});
  c.allow.clear();
  c.key_lengths.clear();
  c.bias.clear();
  if (check.domain().causal_optional()) c.causal = Causal::none;
  c.window_left = c.window_right = -1;  // every key seen: a window would hide the chosen one from some queries
  const Shape& s = c.shape;
  const int64_t drawn = check.in_range(0, s.Tk);
  const int64_t chosen = c.causal == Causal::none ? drawn : 0;
  const bool select = check.coin();
  std::fill(c.q.begin(), c.q.end(), 0.0f);
  if (select) {
    for (int64_t i = 0; i < s.Tq; ++i) c.q[size_t(s.q_at(0, 0, i))] = 1;
    std::fill(c.k.begin(), c.k.end(), 0.0f);
    // exp(-200) of the others' weight: below float's smallest subnormal. Scale 1, or under the
    // default scale only a k that 1/sqrt(dk) leaves at 200 or more.
    const bool default_only = check.domain().only(ATTNCHECK_ONLY_DEFAULT_SCALE);
    if (!default_only) c.scale = 1;
    c.k[size_t(s.k_at(0, 0, chosen))] = default_only ? 200 * std::ceil(std::sqrt(float(s.dk))) : 200;
  }
  check.classify(select, "selection");
  const std::vector<float> out = check.run(c);
  const Reference ref = reference(c.problem());
  for (int64_t i = 0; i < s.Tq; ++i) {
    int64_t permitted = 0;
    for (int64_t j = 0; j < s.Tk; ++j) permitted += c.permits(0, i, j);
    if (permitted == 0) continue;  // an empty row (lower-right, Tq > Tk): the empty-row properties' claim
    for (int64_t col = 0; col < s.dv; ++col) {
      double expected = 0;
      for (int64_t j = 0; j < s.Tk; ++j)
        if (c.permits(0, i, j)) expected += c.v[size_t(s.v_at(0, 0, j) + col)];
      expected = select ? double(c.v[size_t(s.v_at(0, 0, chosen) + col)]) : expected / double(permitted);
      const size_t n = size_t(s.out_at(0, 0, i) + col);
      if (!std::isfinite(ref.out.bound[n]) || !std::isfinite(ref.out.exact[n]) || !std::isfinite(expected)) continue;
      // Within the bound of the exact value, which is the mean, or the chosen value up to exp(-200)
      // of the others: |exact - expected| is that, and the double rounding of the mean.
      ATTNCHECK_REQUIRE(check,
                        std::fabs(double(out[n]) - expected) <= ref.out.bound[n] + std::fabs(double(ref.out.exact[n]) - expected),
                        std::string(select ? "selection" : "average pooling") + " gives " + show(out[n]) + ", expected " +
                            show(expected) + "\n" + describe_failure(c, 0, 0, i));
    }
  }
}

}  // namespace attncheck::properties
