// What the agreement properties share (properties/agrees_with_oracle_in_*.cpp,
// backward_agrees_with_oracle_in_*.cpp, backward_through_a_soft_cap.cpp): one body each for the
// forward and the backward against the oracle, run in float and double.
#pragma once

#include "attncheck/property.hpp"

namespace attncheck::properties {

// The output, and the log-sum-exp when the implementation returns it.
template <class T>
void agrees(Checker& check);

// With `softcap`, a soft-cap that bites (1, 2 or 5, on scores of about that size), so that the
// derivative 1 - tanh^2 is far from 1 in every case, not only in the quarter the generator caps.
template <class T>
void backward_agrees(Checker& check, bool softcap = false);

}  // namespace attncheck::properties
