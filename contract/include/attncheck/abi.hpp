// Between the C++ contract (contract.hpp) and plugin ABI v1 (plugin.h).
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

}  // namespace attncheck
