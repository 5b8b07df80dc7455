// Claim: the allow mask means "may attend" (PyTorch SDPA, CS336 2025): an all-true mask equals no
// mask.

#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(AllTrueMaskEqualsNoMask, .order = 140, .catches = "inverted_polarity", .needs = ATTNCHECK_CAP_ALLOW) {
  Case<float> c = check.draw<float>();
  c.allow.clear();
  const Reference no_mask = reference(c.problem());
  c.allow.assign(size_t(c.shape.allow_size()), 1);
  require_agreement(check, c, check.run(c), no_mask, "an all-true allow mask against no mask");
}

}  // namespace attncheck::properties
