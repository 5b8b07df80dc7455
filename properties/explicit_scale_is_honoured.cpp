// Claim: an explicit scale is honoured (the scores are scaled by it, not by 1/sqrt(dk)).

#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(ExplicitScaleIsHonoured, .order = 160, .catches = "no_scale", .leaves = ATTNCHECK_ONLY_DEFAULT_SCALE) {
  Case<float> c = check.draw<float>();
  c.scale = check.one_of({0.01, 0.125, 0.5, 1.0, 2.0, -0.25, 3.0});
  require_agreement(check, c, check.run(c), reference(c.problem()), "scale " + show(c.scale));
}

}  // namespace attncheck::properties
