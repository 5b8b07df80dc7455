// The built-in backward pass: the gradients of the built-in attention, the reference the backward
// variants are checked against.
#pragma once

#include "attncheck/contract.hpp"

namespace attncheck {

// The gradients of L = sum(out * dout) with respect to q, k and v, on the caller's buffers:
// Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], bias [B,H,Tq,Tk], and the forward's out [B,H,Tq,dv]
// and lse [B,H,Tq] with dout [B,H,Tq,dv] in; dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk] and dv [B,H_kv,Tk,dv]
// written, dk and dv summed over the query heads of each KV head. The weights come from the given lse,
// D_i from the given out. A row with no permitted key gets dq 0 and gives nothing; a key no query sees
// gets dk = dv = 0; forbidden keys and values are never read into a gradient. In f16 and bf16 the
// gradients are computed in T and rounded to the format once. The problem must be well formed.
template <class T>
void attention_backward(const Problem<T>& problem, const Grads<T>& grads);

}  // namespace attncheck
