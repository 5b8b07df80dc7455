// What every property needs: the implementation under test, cases drawn through RapidCheck, and
// the one oracle check with its failure report.
#pragma once

#include <rapidcheck.h>

#include <string>
#include <vector>

#include "attncheck/cases.hpp"
#include "attncheck/compare.hpp"
#include "attncheck/kernel.hpp"

// Fails the property with `message` (built only on failure) unless `condition` holds.
#define ATTNCHECK_REQUIRE(condition, message) \
  do {                                        \
    if (!(condition)) RC_FAIL(message);       \
  } while (0)

namespace attncheck {

// Choices from RapidCheck: each shrinks toward 0, so counterexamples shrink to small shapes and
// plain values (zeros, small integers).
struct RcChooser : Chooser {
  uint64_t below(uint64_t n) override;
};

// Cases the kernel under test can take, drawn through RapidCheck as one value (shown by
// describe()), classified by whether they hold extreme logits, an empty row, and Tq != Tk.
template <class T>
Case<T> draw(CaseLimits limits = {});

// How RapidCheck prints a case in a counterexample: describe().
template <class T>
void showValue(const Case<T>& c, std::ostream& os);

// The kernel under test's out [B,H,Tq,dv] for case c; the property fails if the kernel refuses it.
template <class T>
std::vector<T> run_kernel(const Case<T>& c);

// Fails the property, with the case and the failure report, unless `out` agrees with the
// oracle's `reference` for case c: both gates, the rigorous bound and the precision gate.
template <class T>
void require_agreement(const Case<T>& c, const std::vector<T>& out, const Reference& reference,
                       const std::string& claim);

// A value for a failure message, to 9 significant digits (std::to_string prints 1e-30 as 0.000000).
std::string show(double x);

// Whether the kernel under test has an f64 entry point.
bool has_f64();

}  // namespace attncheck
