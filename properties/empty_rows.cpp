// Claim: a query with no permitted key follows the empty-row policy (output 0 under `zero`, never
// NaN; NaN under `nan`), and the other rows are undisturbed.

#include <cmath>

#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(EmptyRowsFollowThePolicy, .order = 40, .catches = "empty_row_nan") {
  Case<float> c = check.draw<float>();
  const Shape& s = c.shape;
  if (c.allow.empty()) c.allow.assign(size_t(s.allow_size()), 1);
  const int64_t b = check.in_range(0, s.B), i = check.in_range(0, s.Tq);
  std::fill_n(c.allow.begin() + s.allow_at(b, i), s.Tk, uint8_t(0));
  const std::vector<float> out = check.run(c);
  for (int64_t h = 0; h < s.H; ++h)
    for (int64_t col = 0; col < s.dv; ++col) {
      const float x = out[size_t(s.out_at(b, h, i) + col)];
      const bool ok = c.empty_rows == EmptyRows::zero ? x == 0 : std::isnan(x);
      ATTNCHECK_REQUIRE(check, ok, "the emptied row [" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) +
                            "] gives " + show(x) + " under the " +
                            (c.empty_rows == EmptyRows::zero ? "zero" : "nan") + " policy\n" + describe(c));
    }
  require_agreement(check, c, out, reference(c.problem()), "the other rows");
}

}  // namespace attncheck::properties
