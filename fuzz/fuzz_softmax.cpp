// fuzz_softmax checks attncheck's stable softmax (impl/, softmax_stable) on one row of 1 to 16
// logits, float or double, each a small integer, a special value (+-inf, NaN, -FLT_MAX, +-1e4, the
// exp overflow edge, subnormals) or an arbitrary bit pattern, with a mask and an empty-row policy.
// Against the oracle, within its bound: the row is a one-query attention problem whose output is
// the weights (q = [1], k_j = [logit_j], dk 1, scale 1, V the identity). And the invariants: a
// forbidden entry (masked, or -inf) gets exactly 0; a NaN or +inf permitted logit makes the whole
// row NaN; otherwise no NaN, every weight in [0, 1] and their sum within (Tk + 1) eps of 1; a row
// with nothing permitted follows the policy; the log-sum-exp is NaN exactly when the row is.
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "attncheck/cases.hpp"
#include "attncheck/compare.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/softmax.hpp"
#include "fuzz_input.hpp"

namespace attncheck::fuzz {
namespace {

template <class T>
void check(const SoftmaxRow<T>& row) {
  // row: logits and allow [Tk]; w: the weights [Tk].
  constexpr T inf = std::numeric_limits<T>::infinity();
  const auto n = int64_t(row.logits.size());
  std::vector<T> w(row.logits);
  for (int64_t j = 0; j < n; ++j)
    if (!row.allow[size_t(j)]) w[size_t(j)] = -inf;  // how softmax_stable is told an entry is forbidden
  const T lse = softmax_stable(w.data(), n, 1, row.empty);

  Case<T> c;
  c.shape.Tk = n;
  c.q = {T(1)};
  c.k = row.logits;
  c.allow = row.allow;
  c.scale = 1;
  c.empty_rows = row.empty;
  c.mix = "a softmax row: k holds the logits";
  c = with_identity_values(std::move(c));
  if (showing()) std::fputs(describe(c).c_str(), stderr);
  const Comparison result = compare(w.data(), reference(c.problem()).out);
  if (!result.ok())
    finding("softmax_stable disagrees with the oracle: " + result.report(Arithmetic::of<T>().label) + describe(c));

  auto fail = [&](const std::string& what) { finding("softmax_stable: " + what + "\n" + describe(c)); };
  bool any = false, poisoned = false;
  for (int64_t j = 0; j < n; ++j) {
    const T x = row.logits[size_t(j)];
    any |= row.permitted(size_t(j));
    poisoned |= row.permitted(size_t(j)) && (std::isnan(x) || x == inf);
  }
  if (!any) {
    const bool zero = row.empty == EmptyRows::zero;
    for (int64_t j = 0; j < n; ++j)
      if (zero ? w[size_t(j)] != 0 : !std::isnan(w[size_t(j)]))
        fail("a row with no permitted entry gives weight " + show(w[size_t(j)]) + " at " + std::to_string(j) + ", policy " +
             (zero ? "zero" : "nan"));
    if (zero ? lse != -inf : !std::isnan(lse))
      fail("a row with no permitted entry gives log-sum-exp " + show(lse) + ", policy " + (zero ? "zero" : "nan"));
    return;
  }
  if (poisoned) {
    for (int64_t j = 0; j < n; ++j)
      if (!std::isnan(w[size_t(j)]))
        fail("a NaN or +inf permitted logit must make the whole row NaN; weight " + std::to_string(j) + " is " +
             show(w[size_t(j)]));
    if (!std::isnan(lse)) fail("a NaN or +inf permitted logit must give log-sum-exp NaN, not " + show(lse));
    return;
  }
  long double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    const T weight = w[size_t(j)];
    if (!row.permitted(size_t(j)) && weight != 0)
      fail("forbidden entry " + std::to_string(j) + " has weight " + show(weight) + ", not exactly 0");
    if (!(weight >= 0 && weight <= 1)) fail("weight " + std::to_string(j) + " is " + show(weight) + ", outside [0, 1]");
    sum += weight;
  }
  // The weights divide the same exps their sum was made of: only the sum's n - 1 roundings and
  // each division's own rounding separate sum(w) from 1.
  if (!(std::fabs(sum - 1) <= (n + 1) * std::numeric_limits<T>::epsilon()))
    fail("weights sum to 1 + " + show(double(sum - 1)) + ", beyond (Tk + 1) eps");
  if (std::isnan(lse)) fail("log-sum-exp is NaN in a row with no NaN or +inf logit");
}

const auto check_row = [](const auto& row) { check(row); };
const auto decode = [](Chooser& choose, auto use) { read_softmax_input(choose, use); };

}  // namespace
}  // namespace attncheck::fuzz

ATTNCHECK_FUZZ_TARGET(SoftmaxRow, check_row, decode)
