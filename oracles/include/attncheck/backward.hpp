// The exact gradients of attention, and for every element the bound of any correct backward in the
// problem's arithmetic (docs/error-bound.md, "Gradients"): the forward's exact rows (oracle.hpp)
// differentiated key by key in long double, without [Tq,Tk] matrices.
#pragma once

#include <vector>

#include "attncheck/oracle.hpp"

namespace attncheck {

// What a backward is given and what it must compute: the forward's exact out [B,H,Tq,dv] and lse
// [B,H,Tq] rounded to their formats (the inputs, as FlashAttention's backward receives them), and
// the named tensors dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk] and dv [B,H_kv,Tk,dv].
template <class T>
struct GradReference {
  std::vector<T> out, lse;
  ExactTensor dq, dk, dv;
};

// The gradients of `problem` for the output gradient dout [B,H,Tq,dv] (values of the problem's
// format). Every row is computed: dk and dv sum over all of them. An element that a non-finite
// input reaches, or whose terms could overflow T, is not checked (bound +inf). With own_forward,
// the backward being judged was given its own forward's out and lse (as autograd does, and as
// dumped tensors come), each within the forward's bound of the exact, not the exact rounded.
template <class T>
GradReference<T> reference_backward(const Problem<T>& problem, const T* dout, bool own_forward = false);

}  // namespace attncheck
