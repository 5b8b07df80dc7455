// What the varlen properties share: a drawn case's sequences packed (cases.hpp's with_varlen), and
// one of its sequences alone.
#pragma once

#include "attncheck/property.hpp"

namespace attncheck {

// A drawn float case's B sequences packed at lengths of 0 to their whole (with_varlen).
inline Case<float> draw_varlen(Checker& check) { return with_varlen(check, check.draw<float>({.small_only = true})); }

// Sequence b of varlen case c alone, itself a varlen call of one sequence (B 1, cu_seqlens {0, Tq_b}
// and {0, Tk_b}): its rows of q [H,Tq_b,dk], k [H_kv,Tk_b,dk] and v, the rest as c's. b holds at least
// one query and one key (a shape's dims are at least 1).
inline Case<float> sequence_alone(const Case<float>& c, int64_t b) {
  const Sequence q = sequence(c.problem(), b);
  Case<float> one = c;
  Shape& t = one.shape;
  t.B = 1, t.Tq = q.Tq, t.Tk = q.Tk;
  one.cu_seqlens_q = {0, int32_t(q.Tq)};
  one.cu_seqlens_k = {0, int32_t(q.Tk)};
  one.q.resize(size_t(t.q_size()));
  one.k.resize(size_t(t.k_size()));
  one.v.resize(size_t(t.v_size()));
  copy_sequence(c, {0, q.first_q, q.first_k}, one, {0, 0, 0}, q.Tq, q.Tk);
  return one;
}

}  // namespace attncheck
