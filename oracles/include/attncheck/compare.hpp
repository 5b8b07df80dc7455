// The one comparator of the whole suite, and its failure report (docs/error-bound.md, "Comparing").
//
// Rules for one output element, computed x against the oracle's exact e with bound B, in order:
//  - B = +inf: the input leaves T's range (a score or a running sum that overflows T): nothing a
//    correct kernel computes can be held to e. Not checked, only counted.
//  - e NaN (a NaN input reached it, or the nan empty-row policy): x must be NaN.
//  - e +-inf (an infinite permitted input): x must be that infinity, or NaN (an underflowed weight
//    times inf is NaN in any precision).
//  - e finite: x must be finite and |x - e| <= B. +0 and -0 are equal. NaN never passes: the test
//    is written so that a NaN x fails, unlike `fabs(x - e) > tol`.
// Distance in ulps: how many values of T lie between x and e rounded to T; +0 and -0 are 0 apart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attncheck/contract.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck {

struct Mismatch {
  int64_t b, h, i, c;     // the element of out [B,H,Tq,dv]
  double computed;
  long double exact;
  double bound;
  double ratio;           // |computed - exact| / bound; +inf when bound is 0 or computed is not finite
  double ulps;            // -1 when either side is NaN
};

struct Comparison {
  int64_t checked = 0;     // elements compared against a finite bound or a special value
  int64_t unchecked = 0;   // elements outside T's range
  int64_t failed = 0;
  double worst_ratio = 0;  // the largest error/bound among checked finite elements
  Mismatch worst{};        // where it was
  std::vector<Mismatch> mismatches;  // the first 10 failures, in index order
  bool ok() const { return failed == 0; }
  // The failure report: a header line, the first mismatches in a table, a count of the rest.
  std::string report(const char* precision) const;
  // One line: checked, unchecked, largest error/bound and where.
  std::string summary() const;
};

// computed out [B,H,Tq,dv] against the oracle's reference of the same problem.
template <class T>
Comparison compare(const T* computed, const Reference& reference, const Shape& shape);

// The second, tighter gate, for precision loss. G(x) = max over checked finite elements of
// |x - exact| / natural, natural = u * sum_j p_ij |v_jc| + underflow floor. A kernel passes when
// G(kernel) <= kPrecisionFactor * max(G(plain reference kernel, same input), kPrecisionFloor).
struct PrecisionGate {
  double kernel = 0, reference = 0, limit = 0;
  bool ok() const { return kernel <= limit; }
};
extern const double kPrecisionFactor;
extern const double kPrecisionFloor;

// computed and reference_computed out [B,H,Tq,dv], the same problem; the reference run is attncheck's
// built-in implementation in the same precision.
template <class T>
PrecisionGate precision_gate(const T* computed, const T* reference_computed, const Reference& reference);

// The worst |x - exact| / natural over checked finite elements of out [B,H,Tq,dv].
template <class T>
double precision_loss(const T* computed, const Reference& reference);

}  // namespace attncheck
