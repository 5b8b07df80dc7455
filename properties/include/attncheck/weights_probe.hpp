// Reading an implementation's weights through its output alone: with V the identity (dv = Tk),
// out[b,h,i,j] = sum_k w_ik [k == j] = w_ij, exactly (the other terms are zeros).
#pragma once

#include "attncheck/cases.hpp"

namespace attncheck {

// c with dv = Tk and every head's V [Tk,Tk] the identity.
template <class T>
Case<T> with_identity_values(Case<T> c) {
  const Shape& s = c.shape;
  c.shape.dv = s.Tk;
  c.v.assign(size_t(s.B * s.H * s.Tk * s.Tk), T(0));
  for (int64_t bh = 0; bh < s.B * s.H; ++bh)
    for (int64_t j = 0; j < s.Tk; ++j) c.v[size_t((bh * s.Tk + j) * s.Tk + j)] = 1;
  return c;
}

}  // namespace attncheck
