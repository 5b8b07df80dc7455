// Claim: each output coordinate is a convex combination of the permitted values: it lies in
// [min, max] of them (within the bound); one logit far above the rest selects its value; equal
// logits give the mean.

#include <algorithm>
#include <cmath>

#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(OutputsLieBetweenPermittedValues, .order = 90, .catches = "online_no_rescale") {
  const Case<float> c = check.draw<float>();
  const std::vector<float> out = check.run(c);
  const Reference ref = reference(c.problem());
  const Shape& s = c.shape;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        if (!ref.out.row_is_exact(s.lse_at(b, h, i))) continue;                  // a large case's unsampled row
        const std::vector<int64_t> keys = exact_row(c.problem(), b, h, i).keys;  // those that carry weight
        for (int64_t col = 0; col < s.dv; ++col) {
          const size_t n = size_t(s.out_at(b, h, i) + col);
          if (keys.empty() || !std::isfinite(ref.out.bound[n]) || !std::isfinite(ref.out.exact[n])) continue;
          float lo = INFINITY, hi = -INFINITY;
          for (int64_t j : keys) {
            lo = std::min(lo, c.v[size_t(s.v_at(b, h, j) + col)]);
            hi = std::max(hi, c.v[size_t(s.v_at(b, h, j) + col)]);
          }
          ATTNCHECK_REQUIRE(check, out[n] >= lo - ref.out.bound[n] && out[n] <= hi + ref.out.bound[n],
                            "out[" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) + "," +
                                std::to_string(col) + "] = " + show(out[n]) + " lies outside [" + show(lo) + ", " + show(hi) +
                                "]\n" + describe_failure(c, b, h, i));
        }
      }
}

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
