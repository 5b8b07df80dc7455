// The one comparator of the whole suite, its two gates and its failure reports
// (docs/error-bound.md, "Comparing" and "The precision gate").
//
// The rigorous gate, for one output element, computed x against the oracle's exact e with bound B,
// in order (within_bound):
//  - B = +inf: the input leaves T's range (a score or a running sum that overflows T): nothing a
//    correct kernel computes can be held to e. Not checked, only counted.
//  - e NaN (a NaN input reached it, or the nan empty-row policy): x must be NaN.
//  - e +-inf (an infinite permitted input): x must be that infinity, or NaN (an underflowed weight
//    times inf is NaN in any precision).
//  - e finite: x must be finite and |x - e| <= B. +0 and -0 are equal. NaN never passes: the test
//    is written so that a NaN x fails, unlike `fabs(x - e) > tol`.
// An element outside B is *wrong*: no correct implementation computes it. A wrong element with a
// NaN or an infinity on either side is a *wrong special value* and is reported as one ("expected
// NaN, got 0"), since its error/bound says nothing.
//
// The precision gate, over the elements with finite e and B: loss = |x - e| / natural, natural the
// first-order size of a correct kernel's error. An element whose loss exceeds
// kPrecisionFactor * max(largest loss of attncheck's built-in on the same input, kPrecisionFloor)
// is *imprecise*: a sloppy kernel (bf16 weights, a poor exp), not one the bound can call wrong.
//
// Every command and property gives the same verdict (judge): wrong, else imprecise, else right;
// either finding fails.
// Distance in ulps: how many values of T lie between x and e rounded to T; +0 and -0 are 0 apart.
// Unchanged (an output that must not move when something it may not see changes): any NaN equals
// any NaN, since no rule fixes a NaN's sign or payload; everything else must keep its bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "attncheck/bound.hpp"
#include "attncheck/contract.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck {

// One element of a named result tensor, judged.
// An error/bound as reports print it: three significant digits, or as many more as it takes to
// stay on its side of 1 (0.99999999 never reads as 1, a failing 1.0000001 never as a pass).
std::string ratio_text(double ratio);

struct Mismatch {
  const char* tensor;  // "out", "lse"
  int rank;
  int64_t at[4];  // its index, `rank` entries: [b,h,i,c] in out, [b,h,i] in lse
  double computed;
  long double exact;
  double bound;
  double ratio;               // |computed - exact| / bound; +inf when bound is 0 or computed is not finite
  double natural;             // the precision gate's unit for this element
  double loss;                // |computed - exact| / natural
  double ulps;                // -1 when either side is NaN
  std::string where() const;  // "out[0,1,3,2]"
  // For a failing element: whether it is a wrong special value, and what it is ("expected NaN, got 0").
  bool special() const { return !std::isfinite(computed) || !std::isfinite(exact); }
  std::string expected_got() const;
};

// Whether computed x passes against exact e with bound B, by the rules above (with
// infinities_exact, an infinite e must be matched by that infinity alone: ExactTensor).
bool within_bound(long double x, long double e, double B, bool infinities_exact = false);

// Whether `after` is `before` unchanged, by the rule above.
template <class T>
bool unchanged(T before, T after) {
  return (std::isnan(before) && std::isnan(after)) || std::memcmp(&before, &after, sizeof(T)) == 0;
}

// The rigorous gate over a whole output.
struct Comparison {
  int64_t checked = 0;    // elements compared against a finite bound or a special value
  int64_t unchecked = 0;  // elements outside T's range
  int64_t failed = 0;
  int64_t special = 0;               // of the failed, the wrong special values
  int64_t rows = 0, exact_rows = 0;  // query rows of the tensor, and those the oracle computed
  double worst_ratio = 0;            // the largest error/bound among checked finite elements
  Mismatch worst{};                  // where it was
  Mismatch first_special{};          // the first wrong special value, when there is one
  std::vector<Mismatch> mismatches;  // the first 10 failures, in index order
  bool ok() const { return failed == 0; }
  // The failure report: a header line, the first mismatches in a table, a count of the rest.
  std::string report(const char* precision) const;
  // One line: checked, unchecked, largest error/bound and where (inf at the first wrong special
  // value when there is one).
  std::string summary() const;
};

// A computed tensor against the oracle's tensor of the same name and shape.
template <class T>
Comparison compare(const T* computed, const ExactTensor& expected);

// The precision gate over a whole output.
extern const double kPrecisionFactor;
extern const double kPrecisionFloor;
struct PrecisionGate {
  double kernel = 0, reference = 0, limit = 0;  // largest loss of the kernel, of the built-in; the limit
  Mismatch worst{};                             // where the kernel's largest loss is
  int64_t checked = 0;                          // elements with a finite exact value and bound
  int64_t failed = 0;                           // elements whose loss exceeds the limit
  std::vector<Mismatch> mismatches;             // the first 10 of them, in index order
  bool ok() const { return failed == 0; }
  std::string report(const char* precision) const;
  std::string summary() const;
};

// computed and builtin_computed, the same tensor of the same problem; the second from attncheck's
// built-in implementation in the same precision.
template <class T>
PrecisionGate precision_gate(const T* computed, const T* builtin_computed, const ExactTensor& expected);

// The one verdict on an output, both gates: wrong, else imprecise, else right.
struct Verdict {
  Comparison bound;
  PrecisionGate precision;
  const char* label = "";  // the precision's label, e.g. "float32, u = 2^-24"
  bool ok() const { return bound.ok() && precision.ok(); }
  // "wrong: " and the bound's report, or "imprecise: " and the gate's; empty when right.
  std::string report() const;
  // Two lines, one a gate: what was checked and the largest error/bound and loss, with where.
  std::string summary() const;
};
template <class T>
Verdict judge(const T* computed, const T* builtin_computed, const ExactTensor& expected);

}  // namespace attncheck
