#include <cstdio>
#include <type_traits>

#include "attncheck/attention.hpp"
#include "attncheck/property.hpp"
#include "attncheck/rows.hpp"

namespace attncheck {

template <class T>
Case<T> Checker::draw(CaseLimits base) {
  const CaseLimits limits = this->limits(base);
  Case<T> c;
  if constexpr (std::is_same_v<T, float>)
    c = draw_f32(limits);
  else
    c = draw_f64(limits);
  const Shape& s = c.shape;
  bool empty_row = false;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < s.Tq; ++i) {
      bool any = false;
      for (int64_t j = 0; j < s.Tk; ++j) any |= c.permits(b, i, j);
      empty_row |= !any;
    }
  classify(c.mix.find("wide") != std::string::npos || c.mix.find("bits") != std::string::npos ||
               c.mix.find("bias") != std::string::npos,
           "extreme logits");
  classify(empty_row, "empty row");
  classify(s.Tq != s.Tk, "Tq != Tk");
  return c;
}

template <class T>
void require_agreement(Checker& check, const Case<T>& c, const std::vector<T>& out, Reference reference,
                       const std::string& claim) {
  std::vector<T> plain(out.size());
  attention(c.problem(), Result<T>{plain.data()});
  const Verdict verdict = judge_rows(c.problem(), out.data(), plain.data(), reference);
  check.observe(verdict.bound);
  if (!verdict.ok()) check.fail(claim + ": " + verdict.report() + describe(c));
}

template Case<float> Checker::draw(CaseLimits);
template Case<double> Checker::draw(CaseLimits);
template void require_agreement(Checker&, const Case<float>&, const std::vector<float>&, Reference, const std::string&);
template void require_agreement(Checker&, const Case<double>&, const std::vector<double>&, Reference, const std::string&);

}  // namespace attncheck
