// Claim: batch entries and heads are independent: the batched result for (b, h) equals the
// computation of that (b, h) alone (both within the bound of the oracle on the slice alone).

#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(BatchAndHeadIndependence, .order = 130, .catches = "shared_kv_heads") {
  const Case<float> c = check.draw<float>({.min_heads = 2});
  const Shape& s = c.shape;
  const std::vector<float> batched = check.run(c);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const Case<float> one = slice(c, b, h);
      const Reference alone = reference(one.problem());
      const auto first = batched.begin() + s.out_at(b, h, 0);
      const std::string where = "(b, h) = (" + std::to_string(b) + ", " + std::to_string(h) + ")";
      require_agreement(check, one, std::vector<float>(first, first + s.Tq * s.dv), alone, "batched result of " + where);
      require_agreement(check, one, check.run(one), alone, where + " computed alone");
    }
}

}  // namespace attncheck::properties
