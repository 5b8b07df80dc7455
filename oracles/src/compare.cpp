#include "attncheck/compare.hpp"

#include "attncheck/precision.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace attncheck {

// Calibrated on the correct variants of oracles/tests (docs/error-bound.md, "The precision gate").
const double kPrecisionFactor = 8;
const double kPrecisionFloor = 16;

namespace {

constexpr size_t kListed = 10;
constexpr double kInf = std::numeric_limits<double>::infinity();

// x's position among the values of T, with +0 and -0 both at 0.
template <class T>
long double ordinal(T x) {
  using P = Precision<T>;
  const typename P::Bits bits = P::to_bits(x), sign = typename P::Bits(1) << (P::exponent_bits + P::fraction_bits);
  return (bits & sign) ? -(long double)(bits & ~sign) : (long double)bits;
}

// How many values of `format` lie between computed and exact rounded to it.
template <class T>
double ulps(Format format, T computed, long double exact) {
  if (std::isnan(computed) || std::isnan(exact)) return -1;
  if (!is_narrow(format)) return double(std::fabs(ordinal(computed) - ordinal(T(exact))));
  return visit_narrow(format, [&](auto zero) {
    using F = decltype(zero);
    return double(
        std::fabs(ordinal(Precision<F>::from_double(double(computed))) - ordinal(Precision<F>::from_double(double(exact)))));
  });
}

template <class... Args>
std::string format(const char* fmt, Args... args) {
  char line[320];
  std::snprintf(line, sizeof line, fmt, args...);
  return line;
}

// Every element of the tensor's computed rows in index order, judged against its exact value: f(m, n).
template <class T, class F>
void for_each_element(const T* computed, const ExactTensor& ref, F f) {
  const int rank = int(ref.dims.size());
  for (size_t n = 0; n < ref.exact.size(); ++n) {
    if (!ref.row_is_exact(int64_t(n) / ref.row_size)) continue;
    Mismatch m{ref.name,
               rank,
               {0, 0, 0, 0},
               double(computed[n]),
               ref.exact[n],
               ref.bound[n],
               0,
               ref.natural[n],
               0,
               ulps(ref.format, computed[n], ref.exact[n])};
    for (int64_t d = rank - 1, rest = int64_t(n); d >= 0; --d) {  // the index, last dimension fastest
      m.at[d] = rest % ref.dims[size_t(d)];
      rest /= ref.dims[size_t(d)];
    }
    const long double x = computed[n], e = m.exact;
    const double B = m.bound, error = double(std::fabs(x - e));
    const bool finite_check = std::isfinite(e) && std::isfinite(B);
    // A special exact value has no ratio: 0 when matched, +inf when not.
    m.ratio = !std::isfinite(e)                                ? (within_bound(x, e, B, ref.infinities_exact) ? 0 : kInf)
              : !std::isfinite(error) || (B == 0 && error > 0) ? kInf
              : B > 0                                          ? error / B
                                                               : 0;
    // NaN counts as the worst loss; an exact 0 error as none, whatever the unit.
    m.loss = !finite_check ? 0 : error == 0 ? 0 : std::isfinite(error) ? error / m.natural : kInf;
    f(m, n);
  }
}

// The failure report's table of the first mismatches, then a count of the rest: by the bound
// (bound, error/bound) or by the precision gate (natural, loss).
std::string table(const std::vector<Mismatch>& mismatches, int64_t failed, bool precision) {
  std::string text = format("  %-18s %16s %24s %12s %12s %10s\n", "element", "computed", "exact", precision ? "natural" : "bound",
                            precision ? "loss" : "error/bound", "ulps");
  for (const Mismatch& m : mismatches)
    text += format("  %-18s %16.9g %24.17Lg %12.3g %12.3g %10.0f\n", m.where().c_str(), m.computed, m.exact,
                   precision ? m.natural : m.bound, precision ? m.loss : m.ratio, m.ulps);
  if (failed > int64_t(mismatches.size()))
    text += format("  ... and %lld more\n", (long long)(failed - int64_t(mismatches.size())));
  return text;
}

}  // namespace

bool within_bound(long double x, long double e, double B, bool infinities_exact) {
  if (std::isinf(B)) return true;  // outside T's range: not checked
  if (std::isnan(e)) return std::isnan(x);
  if (std::isinf(e)) return x == e || (!infinities_exact && std::isnan(x));
  return std::fabs(x - e) <= B;  // false for NaN x, and for inf x against a finite e
}

std::string Mismatch::where() const {
  std::string text = std::string(tensor) + "[";
  for (int d = 0; d < rank; ++d) text += (d ? "," : "") + std::to_string(at[d]);
  return text + "]";
}

std::string Mismatch::expected_got() const {
  auto value = [](long double x) { return std::isnan(x) ? std::string("NaN") : format("%.9Lg", x); };
  return "expected " + value(exact) + ", got " + value(computed);
}

template <class T>
Comparison compare(const T* computed, const ExactTensor& ref) {
  // computed, ref.exact, ref.bound: the tensor's dims.
  Comparison result;
  result.worst.tensor = ref.name;
  result.rows = ref.row_size > 0 ? int64_t(ref.exact.size()) / ref.row_size : 0;
  result.exact_rows = ref.exact_rows.empty() ? result.rows : std::count(ref.exact_rows.begin(), ref.exact_rows.end(), 1);
  for_each_element(computed, ref, [&](const Mismatch& m, size_t) {
    if (std::isinf(m.bound)) {  // outside T's range: nothing a correct kernel computes can be held to e
      ++result.unchecked;
      return;
    }
    ++result.checked;
    if (std::isfinite(m.exact) && (result.worst.rank == 0 || !(m.ratio <= result.worst_ratio))) {
      result.worst_ratio = m.ratio;
      result.worst = m;
    }
    if (within_bound(m.computed, m.exact, m.bound, ref.infinities_exact)) return;
    ++result.failed;
    if (m.special() && result.special++ == 0) result.first_special = m;
    if (result.mismatches.size() < kListed) result.mismatches.push_back(m);
  });
  return result;
}

std::string ratio_text(double ratio) {
  char text[40];
  std::snprintf(text, sizeof text, "%.3g", ratio);
  for (int digits = 4; digits <= 17; ++digits) {
    const double shown = std::strtod(text, nullptr);
    if ((shown < 1) == (ratio < 1) && (shown > 1) == (ratio > 1)) break;
    std::snprintf(text, sizeof text, "%.*g", digits, ratio);
  }
  return text;
}

std::string Comparison::summary() const {
  const std::string rows_text =
      exact_rows == rows
          ? ""
          : format(" in %lld of %lld rows computed exactly (the other %lld screened against the plain implementation)",
                   (long long)exact_rows, (long long)rows, (long long)(rows - exact_rows));
  // worst_ratio is over finite exact values: beside a wrong special value it would read as if all were well.
  const std::string largest = special > 0    ? "inf at " + first_special.where() + " (" + first_special.expected_got() + ")"
                              : checked == 0 ? std::string("none: no element checked")
                                             : ratio_text(worst_ratio) + " at " + worst.where();
  return format("%lld %s elements checked%s, %lld outside the checkable range, largest error/bound %s", (long long)checked,
                worst.tensor, rows_text.c_str(), (long long)unchecked, largest.c_str());
}

std::string Comparison::report(const char* precision) const {
  const std::string what = special == 0 ? "outside the bound"
                           : special == failed
                               ? "are wrong special values"
                               : format("outside the bound, %lld of them wrong special values", (long long)special);
  return format("%lld of %lld %s elements %s (%s); %s\n", (long long)failed, (long long)checked, worst.tensor, what.c_str(),
                precision, summary().c_str()) +
         table(mismatches, failed, false);
}

template <class T>
PrecisionGate precision_gate(const T* computed, const T* builtin_computed, const ExactTensor& ref) {
  // computed, builtin_computed, ref.exact, ref.natural: the tensor's dims.
  PrecisionGate gate;
  gate.worst.tensor = ref.name;
  for_each_element(builtin_computed, ref, [&](const Mismatch& m, size_t) { gate.reference = std::max(gate.reference, m.loss); });
  gate.limit = kPrecisionFactor * std::max(gate.reference, kPrecisionFloor);
  for_each_element(computed, ref, [&](const Mismatch& m, size_t) {
    gate.checked += std::isfinite(m.exact) && std::isfinite(m.bound);
    if (gate.worst.rank == 0 || m.loss > gate.kernel) {
      gate.kernel = m.loss;
      gate.worst = m;
    }
    if (m.loss <= gate.limit) return;
    ++gate.failed;
    if (gate.mismatches.size() < kListed) gate.mismatches.push_back(m);
  });
  return gate;
}

std::string PrecisionGate::summary() const {
  return format("largest loss %.3g natural units at %s, limit %.3g (%g x max(%g, the built-in's %.3g))", kernel,
                worst.where().c_str(), limit, kPrecisionFactor, kPrecisionFloor, reference);
}

std::string PrecisionGate::report(const char* precision) const {
  return format("%lld of %lld %s elements lose more precision than the limit (%s); %s\n", (long long)failed, (long long)checked,
                worst.tensor, precision, summary().c_str()) +
         table(mismatches, failed, true);
}

template <class T>
Verdict judge(const T* computed, const T* builtin_computed, const ExactTensor& ref) {
  return {compare(computed, ref), precision_gate(computed, builtin_computed, ref), Arithmetic::of(ref.format).label};
}

std::string Verdict::report() const {
  if (!bound.ok()) return "wrong: " + bound.report(label);
  if (!precision.ok()) return "imprecise: " + precision.report(label);
  return "";
}

std::string Verdict::summary() const { return "  bound: " + bound.summary() + "\n  precision: " + precision.summary(); }

template Comparison compare(const float*, const ExactTensor&);
template Comparison compare(const double*, const ExactTensor&);
template PrecisionGate precision_gate(const float*, const float*, const ExactTensor&);
template PrecisionGate precision_gate(const double*, const double*, const ExactTensor&);
template Verdict judge(const float*, const float*, const ExactTensor&);
template Verdict judge(const double*, const double*, const ExactTensor&);

}  // namespace attncheck
