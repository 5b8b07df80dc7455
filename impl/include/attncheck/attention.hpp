// The built-in attention implementation: the reference kernel that attncheck itself is checked on.
#pragma once

#include "attncheck/contract.hpp"

namespace attncheck {

// softmax(scale * Q K^T + bias, over permitted keys) V for every (b, h), on the caller's buffers:
// Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv] in; out [B,H,Tq,dv], and optionally
// weights [B,H,Tq,Tk] and lse [B,H,Tq], written. Forbidden keys and values are never read into
// the result. The problem must be well formed (problem_error empty).
template <class T>
void attention(const Problem<T>& problem, const Result<T>& result);

}  // namespace attncheck
