// Claim: the default scale is 1/sqrt(dk), the width of one head, not of the model (H dk); an
// explicit scale is honoured.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "attncheck/property_support.hpp"

namespace attncheck {

RC_GTEST_PROP(Property, DefaultScaleIsOneHeadsWidth, ()) {
  Case<float> c = draw<float>({.min_heads = 2});  // with one head the two widths agree
  c.scale = 0;
  Case<float> explicit_scale = c;
  explicit_scale.scale = 1 / std::sqrt(double(c.shape.dk));
  require_agreement(c, run_kernel(c), reference(explicit_scale.problem()), "the default scale is 1/sqrt(dk)");
}

RC_GTEST_PROP(Property, ExplicitScaleIsHonoured, ()) {
  Case<float> c = draw<float>();
  c.scale = *rc::gen::element(0.01, 0.125, 0.5, 1.0, 2.0, -0.25, 3.0);
  require_agreement(c, run_kernel(c), reference(c.problem()), "scale " + show(c.scale));
}

}  // namespace attncheck
