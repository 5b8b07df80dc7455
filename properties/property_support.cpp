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

std::vector<float> Checker::run(const Case<float>& c, std::vector<float>&) {
  fail("the implementation returns no log-sum-exp\n" + describe(c));
}
std::vector<double> Checker::run(const Case<double>& c, std::vector<double>&) {
  fail("the implementation returns no log-sum-exp\n" + describe(c));
}

template <class T>
void require_agreement(Checker& check, const Case<T>& c, const std::vector<T>& out, Reference reference,
                       const std::string& claim, const std::vector<T>* lse) {
  std::vector<T> plain(out.size()), plain_lse(size_t(c.shape.lse_size()));
  attention(c.problem(), Result<T>{plain.data(), nullptr, plain_lse.data()});
  const Verdict verdict = judge_rows(c.problem(), out.data(), plain.data(), reference);
  check.observe(verdict.bound);
  if (!verdict.ok()) check.fail(claim + ": " + verdict.report() + describe(c));
  if (!lse) return;
  const Verdict lse_verdict = judge(lse->data(), plain_lse.data(), reference.lse);  // the rows out's verdict computed
  check.observe(lse_verdict.bound);
  if (!lse_verdict.ok()) check.fail(claim + " (its log-sum-exp): " + lse_verdict.report() + describe(c));
}

template Case<float> Checker::draw(CaseLimits);
template Case<double> Checker::draw(CaseLimits);
template void require_agreement(Checker&, const Case<float>&, const std::vector<float>&, Reference, const std::string&,
                                const std::vector<float>*);
template void require_agreement(Checker&, const Case<double>&, const std::vector<double>&, Reference, const std::string&,
                                const std::vector<double>*);

}  // namespace attncheck
