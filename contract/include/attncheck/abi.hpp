// Between the C++ contract (contract.hpp) and plugin ABIs v1 and v2 (plugin.h).
#pragma once

#include <cstdint>
#include <vector>

#include "attncheck/contract.hpp"
#include "attncheck/plugin.h"

namespace attncheck {

// The ABI view of `problem` writing out [B,H,Tq,dv]; ABI v1 carries no bias and only the zero
// empty-row policy. Key lengths fold into an allow mask [B,Tq,Tk] built in `allow_storage`, which
// must outlive the view.
template <class T>
attncheck_problem to_abi(const Problem<T>& problem, T* out, std::vector<uint8_t>& allow_storage);

// The C++ view of an ABI problem, the output pointer aside (p.out).
template <class T>
Problem<T> from_abi(const attncheck_problem& p);

// The ABI v2 dtype of a format.
template <class T>
inline constexpr int32_t abi_dtype = -1;
template <>
inline constexpr int32_t abi_dtype<float> = ATTNCHECK_F32;
template <>
inline constexpr int32_t abi_dtype<double> = ATTNCHECK_F64;

// The ABI v2 view of `problem` writing out [B,H,Tq,dv] and, when not null, lse [B,H,Tq]. v2 has
// no empty-row policy but zero.
template <class T>
attncheck_problem_v2 to_abi_v2(const Problem<T>& problem, T* out, T* lse);

// The C++ view of an ABI v2 problem whose dtype is T's, the output pointers aside.
template <class T>
Problem<T> from_abi_v2(const attncheck_problem_v2& p);

}  // namespace attncheck
