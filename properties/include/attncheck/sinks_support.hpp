// What the sink properties share: a case given one sink per query head (contract.hpp), drawn from
// -inf (no sink) through 0 to +30, the sink that outweighs every key.
#pragma once

#include "attncheck/property.hpp"

namespace attncheck {

// c with a sink drawn for each query head [H] (draw_sink, cases.hpp).
template <class T>
Case<T> with_sinks(Checker& check, Case<T> c) {
  c.sinks.resize(size_t(c.shape.H));
  for (float& sink : c.sinks) sink = draw_sink(check);
  return c;
}

}  // namespace attncheck
