// The cause of a finding in one sentence, where its failure matches a known bug class: read off by
// probing the kernel (never guessed from a report's text). Each class is one row: when it applies
// (what the finding's failed call shows), and its probe: small problems inside the kernel's claims
// and domain on which the class and the contract differ by far more than the bound, the kernel's
// answers read against both, and for a finite mask value or a running maximum's start the value
// itself estimated. docs/checking.md, "Causes".
#pragma once

#include <map>
#include <string>
#include <utility>

#include "attncheck/campaign.hpp"
#include "attncheck/isolated_kernel.hpp"

namespace attncheck {

// What one kernel's probes answered, by class and format: a campaign asks each once, however many
// findings it examines (a probe is dozens of calls: a second each of a slow library).
struct CauseCache {
  std::map<std::pair<int, Format>, std::string> answered;
};

// The sentence of the first class whose probe the kernel matches, or empty.
std::string cause_of(IsolatedKernel& kernel, const Finding& finding, CauseCache& cache);

// A value as a person writes a round number: -1e9, -10000, -1e+30 as -1e30, 3.4e38 (three
// significant digits at most, no trailing zeros).
std::string round_number(double x);

// The number with the fewest significant digits in [lo, hi] (the one nearest their middle among
// those), for a value known to lie in that range: -10000 in [-10003, -9984].
double roundest_in(double lo, double hi);

}  // namespace attncheck
