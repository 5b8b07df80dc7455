// What the saturation properties share (properties/unscaled_softmax_saturates_as_d_grows.cpp,
// scaled_softmax_stays_put_as_d_grows.cpp, soft_cap_bounds_every_weight.cpp): the probe, N = 1024
// independent queries (one per head) over 32 Gaussian keys each, and its weights summed up. 32
// keys, not 128: V = I is [32,32] per query, so the probes send 15 million values, not 112 million,
// and a slow kernel or a pipe to Python spends a fraction of a second on them. Fixed seeds: the
// outcome is the same on every run.
#pragma once

#include <cstdint>

#include "attncheck/property.hpp"

namespace attncheck::properties {

inline constexpr int64_t kQueries = 1024, kKeys = 32;

// The probes' domain: one query over 32 keys, no causal mask, V = I (dv 32 whatever d is), 1024
// heads. Repeated to a square causal problem it would send 32 times the work for nothing.
inline constexpr uint32_t kSaturationLeaves =
    ATTNCHECK_ONLY_CAUSAL | ATTNCHECK_ONLY_SQUARE | ATTNCHECK_ONLY_EQUAL_HEAD_DIMS | ATTNCHECK_ONLY_WITHIN_LIMITS;

struct Saturation {
  double largest_weight = 0, jacobian_trace = 0;  // means over the queries
};

// N Gaussian queries over 32 Gaussian keys each (one head per query) in dimension d, scaled or
// not, with V = I so that the output is the weights.
Case<float> probe(int64_t d, bool scaled);

// The probe's weights [N,32], summed up.
Saturation measure(Checker& check, int64_t d, bool scaled);

}  // namespace attncheck::properties
