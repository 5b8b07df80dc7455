// Claim: the default scale is 1/sqrt(dk), the width of one head, not of the model (H dk); an
// explicit scale is honoured.

#include <cmath>

#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(DefaultScaleIsOneHeadsWidth, .order = 50, .catches = "model_width_scale") {
  Case<float> c = check.draw<float>({.min_heads = 2});  // with one head the two widths agree
  c.scale = 0;
  Case<float> explicit_scale = c;
  explicit_scale.scale = 1 / std::sqrt(double(c.shape.dk));
  require_agreement(check, c, check.run(c), reference(explicit_scale.problem()), "the default scale is 1/sqrt(dk)");
}

ATTNCHECK_PROPERTY(ExplicitScaleIsHonoured, .order = 160, .catches = "no_scale", .leaves = ATTNCHECK_ONLY_DEFAULT_SCALE) {
  Case<float> c = check.draw<float>();
  c.scale = check.one_of({0.01, 0.125, 0.5, 1.0, 2.0, -0.25, 3.0});
  require_agreement(check, c, check.run(c), reference(c.problem()), "scale " + show(c.scale));
}

}  // namespace attncheck::properties
