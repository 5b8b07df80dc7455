// Claim: a query with no permitted key follows the empty-row policy (output 0 and log-sum-exp -inf,
// or 0 under --lse-empty zero, under `zero`, never NaN; both NaN under `nan`; the mean of its values
// within the bound under `mean`; anything under `any`), and the other rows are undisturbed.

#include <cmath>

#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(EmptyRowsFollowThePolicy, .order = 40, .catches = "empty_row_nan",
                   .needs_one_of = ATTNCHECK_CAP_ALLOW | ATTNCHECK_CAP_KV_LENS) {
  Case<float> c = check.draw<float>();
  const Shape& s = c.shape;
  const int64_t b = check.in_range(0, s.B), i = check.in_range(0, s.Tq);
  // Row (b, i) emptied by the allow mask, or, for a kernel that takes none, every row of batch b by
  // a key length of 0.
  if (check.claims(ATTNCHECK_CAP_ALLOW)) {
    if (c.allow.empty()) c.allow.assign(size_t(s.allow_size()), 1);
    std::fill_n(c.allow.begin() + s.allow_at(b, i), s.Tk, uint8_t(0));
  } else {  // key lengths (.needs_one_of)
    if (c.key_lengths.empty()) c.key_lengths.assign(size_t(s.B), int32_t(s.Tk));
    c.key_lengths[size_t(b)] = 0;
  }
  std::vector<float> lse;
  const std::vector<float> out = check.run_with_lse(c, lse);
  // zero and nan are exact values, checked here by name; mean (a mean of values within its bound)
  // and any (nothing) are the oracle's, checked below with the other rows.
  const bool zero = c.empty_rows == EmptyRows::zero, nan = c.empty_rows == EmptyRows::nan;
  const float empty_lse = c.lse_empty == LseEmpty::zero ? 0.0f : -INFINITY;
  for (int64_t h = 0; h < s.H && (zero || nan); ++h) {
    const std::string row = "[" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) + "]";
    const std::string policy = std::string(" under --empty-rows ") + empty_rows_word(c.empty_rows);
    if (!lse.empty()) {
      const float x = lse[size_t(s.lse_at(b, h, i))];
      ATTNCHECK_REQUIRE(
          check, zero ? x == empty_lse : std::isnan(x),
          "the emptied row " + row + " has log-sum-exp " + show(x) + policy +
              (zero ? " --lse-empty " + std::string(c.lse_empty == LseEmpty::zero ? "zero (expected 0)" : "ninf (expected -inf)")
                    : "") +
              "\n" + describe_failure(c, b, h, i));
    }
    for (int64_t col = 0; col < s.dv; ++col) {
      const float x = out[size_t(s.out_at(b, h, i) + col)];
      // What a user may have meant: the other exact policy, when it would accept the value.
      const char* other = zero && std::isnan(x) ? " (--empty-rows nan would accept it)"
                          : nan && x == 0       ? " (--empty-rows zero would accept it)"
                                                : "";
      ATTNCHECK_REQUIRE(check, zero ? x == 0 : std::isnan(x),
                        "the emptied row " + row + " gives " + show(x) + policy + other + "\n" + describe_failure(c, b, h, i));
    }
  }
  require_agreement(check, c, out, reference(c.problem()), zero || nan ? "the other rows" : "the rows", lse_if_any(lse));
}

}  // namespace attncheck::properties
