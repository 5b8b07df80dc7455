// Between the C++ contract (contract.hpp) and plugin ABI v1 (plugin.h).
#pragma once

#include <cstdint>
#include <vector>

#include "attncheck/contract.hpp"
#include "attncheck/plugin.h"

namespace attncheck {

// What ABI v1 can carry: no bias, and only the zero empty-row policy (key lengths fold into allow).
template <class T>
bool abi_expressible(const Problem<T>& problem);

// The ABI view of an expressible `problem` writing out [B,H,Tq,dv]. With key lengths the allow
// mask [B,Tq,Tk] is built in `allow_storage`, which must outlive the view.
template <class T>
attncheck_problem to_abi(const Problem<T>& problem, T* out, std::vector<uint8_t>& allow_storage);

// The C++ view of an ABI problem, the output pointer aside (p.out).
template <class T>
Problem<T> from_abi(const attncheck_problem& p);

}  // namespace attncheck
