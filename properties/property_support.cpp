#include "attncheck/property_support.hpp"

#include <cstdio>
#include <cstdlib>

#include "attncheck/attention.hpp"
#include "attncheck/weights_probe.hpp"

namespace attncheck {

uint64_t RcChooser::below(uint64_t n) { return n <= 1 ? 0 : *rc::gen::inRange<uint64_t>(0, n); }

std::string show(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", x);
  return text;
}

bool has_f64() { return kernel_from_environment().plugin.forward_f64 != nullptr; }

template <class T>
void showValue(const Case<T>& c, std::ostream& os) {
  os << describe(c);
}

template <class T>
Case<T> draw(CaseLimits limits) {
  limits = kernel_from_environment().limits(limits);
  // One generated value, so that a counterexample prints as describe() shows it, not as its picks.
  const Case<T> c = *rc::gen::exec([limits] {
    RcChooser choose;
    return draw_case<T>(choose, limits);
  });
  const Shape& s = c.shape;
  bool empty_row = false;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < s.Tq; ++i) {
      bool any = false;
      for (int64_t j = 0; j < s.Tk; ++j) any |= mask_permits(c, b, i, j);
      empty_row |= !any;
    }
  const bool extreme = c.mix.find("wide") != std::string::npos || c.mix.find("bits") != std::string::npos ||
                       c.mix.find("bias") != std::string::npos;
  RC_CLASSIFY(extreme, "extreme logits");
  RC_CLASSIFY(empty_row, "empty row");
  RC_CLASSIFY(s.Tq != s.Tk, "Tq != Tk");
  return c;
}

template <class T>
std::vector<T> run_kernel(const Case<T>& c) {
  std::vector<T> out;
  if (const int32_t status = run_kernel(kernel_from_environment(), c, out); status != 0)
    RC_FAIL("the kernel refused a valid problem (status " + std::to_string(status) + ")\n" + describe(c));
  return out;
}

template <class T>
void require_agreement(const Case<T>& c, const std::vector<T>& out, const Reference& reference,
                       const std::string& claim) {
  const char* precision = sizeof(T) == 4 ? "float32, u = 2^-24" : "float64, u = 2^-53";
  const Comparison result = compare(out.data(), reference, c.shape);
  if (!result.ok()) RC_FAIL(claim + ": " + result.report(precision) + describe(c));
  std::vector<T> plain(out.size());
  attention(c.problem(), Result<T>{plain.data()});
  const PrecisionGate gate = precision_gate(out.data(), plain.data(), reference);
  if (!gate.ok())
    RC_FAIL(claim + ": precision loss " + show(gate.kernel) + " natural units, limit " +
            show(gate.limit) + " (the built-in: " + show(gate.reference) + ")\n" + describe(c));
}

template void showValue(const Case<float>&, std::ostream&);
template void showValue(const Case<double>&, std::ostream&);
template Case<float> draw(CaseLimits);
template Case<double> draw(CaseLimits);
template std::vector<float> run_kernel(const Case<float>&);
template std::vector<double> run_kernel(const Case<double>&);
template void require_agreement(const Case<float>&, const std::vector<float>&, const Reference&, const std::string&);
template void require_agreement(const Case<double>&, const std::vector<double>&, const Reference&, const std::string&);

}  // namespace attncheck
