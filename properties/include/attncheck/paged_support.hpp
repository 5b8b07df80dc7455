// What the paged-KV properties share: a drawn case laid out in a pool of blocks (cases.hpp's
// with_paging), its unused slots holding one of the values a forbidden key is poisoned with.
#pragma once

#include "attncheck/property.hpp"

namespace attncheck {

// A drawn float case paged (K and V in a shuffled pool, their unused slots poisoned), and the poison.
struct PagedCase {
  Case<float> c;
  float poison;
};
inline PagedCase draw_paged(Checker& check, CaseLimits limits = {}) {
  const Case<float> dense = check.draw<float>(limits);
  const std::vector<float> poisons = forbidden_poisons(check, dense.format);
  const float poison = poisons[size_t(check.in_range(0, int64_t(poisons.size())))];
  return {with_paging(check, dense, poison), poison};
}

}  // namespace attncheck
