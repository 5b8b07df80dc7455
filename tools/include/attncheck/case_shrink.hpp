// Simpler neighbours of a case, for making a counterexample small and plain (the campaign's
// shrinking, after the generator's choices): whole batches, heads, queries, keys and columns
// removed (halves first, then smaller ranges, then one at a time; members of every KV group too), a
// window narrowed, masks and options cleared, causal and window masks folded into one allow mask
// (for a kernel that takes one), then whole tensors set to 0 and single values moved to 0, +-1,
// +-2, +-3, the power of two below them and their integer part. Working on the case itself, not on
// the choices that drew it, a removal leaves every other value where it was.
#pragma once

#include <functional>

#include "attncheck/cases.hpp"

namespace attncheck {

// Offers `accept` each neighbour of c, simplest change first, until it returns true; returns
// whether one was accepted (c is not touched after that). Every neighbour is smaller or plainer
// than c: never a larger shape, never a value farther from 0. A neighbour uses no feature outside
// `capabilities` (ABI v2's bits) that c does not.
template <class T>
bool offer_simpler(const Case<T>& c, uint32_t capabilities, const std::function<bool(Case<T>&&)>& accept);

// The case's size as shrinking measures it: B H Tq Tk (dk + dv).
template <class T>
int64_t case_size(const Case<T>& c) {
  const Shape& s = c.shape;
  return s.B * s.H * s.Tq * s.Tk * (s.dk + s.dv);
}

}  // namespace attncheck
