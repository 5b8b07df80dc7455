// What the sink properties share: a case given one sink per query head (contract.hpp), drawn from
// -inf (no sink) through 0 to +30, the sink that outweighs every key.
#pragma once

#include <limits>

#include "attncheck/property.hpp"

namespace attncheck {

// One head's sink: 0 first (the simplest, a weight of exp(-m)), then -inf, +30, -30, small and
// fractional values, a normal draw, and one far below any score.
inline float draw_sink(Checker& check) {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  switch (check.below(9)) {
    case 0: return 0;
    case 1: return kNone;
    case 2: return 30;
    case 3: return -30;
    case 4: return 1.5f;
    case 5: return -2.25f;
    case 6: return 8;
    case 7: return float(check.in_range(-400, 400)) / 64;  // a multiple of 1/64 in [-6.25, 6.25)
    default: return -1e4f;
  }
}

// c with a sink drawn for each query head [H].
template <class T>
Case<T> with_sinks(Checker& check, Case<T> c) {
  c.sinks.resize(size_t(c.shape.H));
  for (float& sink : c.sinks) sink = draw_sink(check);
  return c;
}

}  // namespace attncheck
