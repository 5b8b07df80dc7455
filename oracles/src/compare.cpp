#include "attncheck/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace attncheck {

// Calibrated on the correct variants of oracles/tests (docs/error-bound.md, "The precision gate").
const double kPrecisionFactor = 8;
const double kPrecisionFloor = 16;

namespace {

constexpr size_t kListed = 10;

// x's position among the values of T, with +0 and -0 both at 0.
template <class T>
long double ordinal(T x) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  Bits bits;
  std::memcpy(&bits, &x, sizeof bits);
  const Bits sign = Bits(1) << (8 * sizeof(T) - 1);
  return (bits & sign) ? -(long double)(bits & ~sign) : (long double)bits;
}

template <class T>
double ulps(T computed, long double exact) {
  if (std::isnan(computed) || std::isnan(exact)) return -1;
  return double(std::fabs(ordinal(computed) - ordinal(T(exact))));
}

// Whether computed x passes against exact e with bound B, by the rules in compare.hpp.
bool passes(long double x, long double e, double B) {
  if (std::isnan(e)) return std::isnan(x);
  if (std::isinf(e)) return x == e || std::isnan(x);
  return std::fabs(x - e) <= B;  // false for NaN x, and for inf x against a finite e
}

template <class... Args>
std::string format(const char* fmt, Args... args) {
  char line[256];
  std::snprintf(line, sizeof line, fmt, args...);
  return line;
}

}  // namespace

template <class T>
Comparison compare(const T* computed, const Reference& ref, const Shape& s) {
  // computed, ref.exact, ref.bound: [B,H,Tq,dv].
  Comparison result;
  size_t n = 0;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i)
        for (int64_t c = 0; c < s.dv; ++c, ++n) {
          const long double x = computed[n], e = ref.exact[n];
          const double B = ref.bound[n];
          if (std::isinf(B)) {  // outside T's range: nothing a correct kernel computes can be held to e
            ++result.unchecked;
            continue;
          }
          const bool finite_check = std::isfinite(e);
          ++result.checked;
          const double error = double(std::fabs(x - e));
          const double ratio = !std::isfinite(error) || (finite_check && B == 0 && error > 0)
                                   ? std::numeric_limits<double>::infinity()
                                   : (B > 0 ? error / B : 0);
          const Mismatch m{b, h, i, c, double(x), e, B, finite_check ? ratio : 0, ulps(computed[n], e)};
          if (finite_check && !(ratio <= result.worst_ratio)) {
            result.worst_ratio = ratio;
            result.worst = m;
          }
          if (passes(x, e, B)) continue;
          ++result.failed;
          if (result.mismatches.size() < kListed) result.mismatches.push_back(m);
        }
  return result;
}

std::string Comparison::summary() const {
  return format("%lld outputs checked, %lld outside the checkable range, largest error/bound %.3g at [%lld,%lld,%lld,%lld]",
                (long long)checked, (long long)unchecked, worst_ratio, (long long)worst.b, (long long)worst.h,
                (long long)worst.i, (long long)worst.c);
}

std::string Comparison::report(const char* precision) const {
  std::string text = format("%lld of %lld outputs outside the bound (%s); %s\n", (long long)failed,
                            (long long)checked, precision, summary().c_str());
  text += format("  %-18s %16s %24s %12s %12s %10s\n", "[b,h,i,c]", "computed", "exact", "bound", "error/bound",
                 "ulps");
  for (const Mismatch& m : mismatches) {
    const std::string index = format("[%lld,%lld,%lld,%lld]", (long long)m.b, (long long)m.h, (long long)m.i,
                                     (long long)m.c);
    text += format("  %-18s %16.9g %24.17Lg %12.3g %12.3g %10.0f\n", index.c_str(), m.computed, m.exact, m.bound,
                   m.ratio, m.ulps);
  }
  if (failed > int64_t(mismatches.size()))
    text += format("  ... and %lld more\n", (long long)(failed - int64_t(mismatches.size())));
  return text;
}

template <class T>
double precision_loss(const T* computed, const Reference& ref) {
  // computed, ref.exact, ref.natural: [B,H,Tq,dv].
  double worst = 0;
  for (size_t n = 0; n < ref.exact.size(); ++n) {
    if (!std::isfinite(ref.exact[n]) || !std::isfinite(ref.bound[n])) continue;
    const double error = double(std::fabs((long double)computed[n] - ref.exact[n]));
    const double loss = error == 0 ? 0 : error / ref.natural[n];
    if (!(loss <= worst)) worst = std::isnan(loss) ? std::numeric_limits<double>::infinity() : loss;  // NaN counts as the worst
  }
  return worst;
}

template <class T>
PrecisionGate precision_gate(const T* computed, const T* reference_computed, const Reference& ref) {
  PrecisionGate gate;
  gate.kernel = precision_loss(computed, ref);
  gate.reference = precision_loss(reference_computed, ref);
  gate.limit = kPrecisionFactor * std::max(gate.reference, kPrecisionFloor);
  return gate;
}

template Comparison compare(const float*, const Reference&, const Shape&);
template Comparison compare(const double*, const Reference&, const Shape&);
template double precision_loss(const float*, const Reference&);
template double precision_loss(const double*, const Reference&);
template PrecisionGate precision_gate(const float*, const float*, const Reference&);
template PrecisionGate precision_gate(const double*, const double*, const Reference&);

}  // namespace attncheck
