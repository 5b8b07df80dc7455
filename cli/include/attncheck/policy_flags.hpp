// The policies (policies.hpp) as flags: one --FLAG CHOICE per row of the policy table, declared and
// read the same way by every subcommand that checks (check, compare).
#pragma once

#include "attncheck/contract.hpp"
#include "attncheck/flags.hpp"

namespace attncheck {

// Declares --empty-rows, --lse-empty and (with `drawn`, for a check that draws its inputs)
// --masked-inputs, each with its choices and what they mean.
Flags& policy_flags(Flags& flags, bool drawn = true);
// Sets in `policies` each policy whose flag was given; the others keep their value.
void read_policy_flags(const FlagValues& given, Policies& policies);

}  // namespace attncheck
