// Claim: the default scale is 1/sqrt(dk), the width of one head, not of the model (H dk).

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

}  // namespace attncheck::properties
