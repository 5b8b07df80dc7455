// Simpler neighbours of a case, for making a counterexample small and plain (the campaign's
// shrinking, after the generator's choices): whole batches, heads, queries, keys and columns
// removed (halves first, then smaller ranges, then one at a time; members of every KV group too), a
// window narrowed, masks and options cleared, causal and window masks folded into one allow mask
// (for a kernel that takes one), then whole tensors set to 0 and single values moved to 0, +-1,
// +-2, +-3, the power of two below them and their integer part (a value below 1 in magnitude to
// +-1, +-2, +-3 or +-0.5: an error shows on plain values). Working on the case itself, not on
// the choices that drew it, a removal leaves every other value where it was.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "attncheck/cases.hpp"

namespace attncheck {

// Offers `accept` each neighbour of c, simplest change first, until it returns true; returns
// whether one was accepted (c is not touched after that). Every neighbour is smaller or plainer
// than c: never a larger shape, never a value farther from 0 but a plain one (+-0.5, 1, 2, 3) in
// place of one below 1 in magnitude. A neighbour uses no feature outside
// `capabilities` (ABI v2's bits) that c does not, and stays inside `domain`.
template <class T>
bool offer_simpler(const Case<T>& c, uint32_t capabilities, const std::function<bool(Case<T>&&)>& accept,
                   const Domain& domain = {});

// c without each of its features in turn, for saying which ones a finding needs ("fails only with:
// grouped KV heads"): the same problem where it can be rewritten (grouped KV heads repeated into
// full heads; a causal mode, a window or key lengths folded into the allow mask, when
// `capabilities` take one; a 2-byte format read as f32, which holds its values, when they take f32),
// else the feature dropped (a soft-cap, a bias, an explicit scale). Each with the name reports give
// what it removed: the feature table's, or "explicit scale". One that leaves `domain` is not tried.
template <class T>
struct WithoutFeature {
  std::string name;
  Case<T> c;
};
template <class T>
std::vector<WithoutFeature<T>> without_each_feature(const Case<T>& c, uint32_t capabilities, const Domain& domain = {});

// The case's size as shrinking measures it: B H Tq Tk (dk + dv).
template <class T>
int64_t case_size(const Case<T>& c) {
  const Shape& s = c.shape;
  return s.B * s.H * s.Tq * s.Tk * (s.dk + s.dv);
}

}  // namespace attncheck
