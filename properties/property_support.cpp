#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <type_traits>

#include "attncheck/attention.hpp"
#include "attncheck/attention_backward.hpp"
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

std::vector<float> Checker::run(const Case<float>& c, std::vector<uint8_t>&) {
  fail("the implementation writes no dropout keep mask\n" + describe(c));
}

std::vector<float> Checker::run_layer(const LayerCase<float>& c, std::vector<float>*) {
  fail("the implementation has no multi-head layer\n" + describe(c));
}
std::vector<double> Checker::run_layer(const LayerCase<double>& c, std::vector<double>*) {
  fail("the implementation has no multi-head layer\n" + describe(c));
}

void Checker::run_backward(const Case<float>& c, const Grads<float>&) {
  fail("the implementation has no backward\n" + describe(c));
}
void Checker::run_backward(const Case<double>& c, const Grads<double>&) {
  fail("the implementation has no backward\n" + describe(c));
}

template <class T>
Checker::Gradients<T> Checker::gradients(const Case<T>& c, const GradReference<T>& reference, const std::vector<T>& dout) {
  const Shape& s = c.shape;
  const T nan = std::numeric_limits<T>::quiet_NaN();  // unwritten gradients fail
  Gradients<T> g{std::vector<T>(size_t(s.q_size()), nan), std::vector<T>(size_t(s.k_size()), nan),
                 std::vector<T>(size_t(s.v_size()), nan)};
  run_backward(c, Grads<T>{reference.out.data(), reference.lse.data(), dout.data(), g.dq.data(), g.dk.data(), g.dv.data()});
  return g;
}

template <class T>
void require_gradients(Checker& check, const Case<T>& c, const Checker::Gradients<T>& computed,
                       const GradReference<T>& reference, const std::vector<T>& dout, const std::string& claim) {
  const Shape& s = c.shape;
  Checker::Gradients<T> plain{std::vector<T>(size_t(s.q_size())), std::vector<T>(size_t(s.k_size())),
                              std::vector<T>(size_t(s.v_size()))};
  attention_backward(c.problem(), Grads<T>{reference.out.data(), reference.lse.data(), dout.data(), plain.dq.data(),
                                           plain.dk.data(), plain.dv.data()});
  const std::pair<const std::vector<T>*, std::pair<const std::vector<T>*, const ExactTensor*>> tensors[] = {
      {&computed.dq, {&plain.dq, &reference.dq}}, {&computed.dk, {&plain.dk, &reference.dk}},
      {&computed.dv, {&plain.dv, &reference.dv}}};
  for (const auto& [kernel, expected] : tensors) {
    const Verdict verdict = judge(kernel->data(), expected.first->data(), *expected.second);
    check.observe(verdict.bound);
    if (!verdict.ok()) check.fail(claim + ": " + verdict.report() + describe(c));
  }
}

ShiftedCase with_scores_shifted(const Case<float>& c, double a) {
  // c's q [B,H,Tq,dk] and k [B,H_kv,Tk,dk] in; the shifted case's, [..,dk + 1], out.
  const Shape& s = c.shape;
  Case<float> shifted = c;
  shifted.shape.dk = s.dk + 1;
  shifted.scale = effective_scale(s, c.scale);
  float appended = float(round_to(c.format, a / shifted.scale));
  for (; !std::isfinite(appended); a /= 10) appended = float(round_to(c.format, a / 10 / shifted.scale));
  shifted.q.clear();
  shifted.k.clear();
  for (int64_t row = 0; row < s.B * s.H * s.Tq; ++row) {
    shifted.q.insert(shifted.q.end(), c.q.begin() + row * s.dk, c.q.begin() + (row + 1) * s.dk);
    shifted.q.push_back(appended);
  }
  for (int64_t row = 0; row < s.B * s.kv_heads() * s.Tk; ++row) {
    shifted.k.insert(shifted.k.end(), c.k.begin() + row * s.dk, c.k.begin() + (row + 1) * s.dk);
    shifted.k.push_back(1);
  }
  return {shifted, shifted.scale * appended};
}

template <class T>
std::string describe_failure(const Case<T>& c, int64_t b, int64_t h, int64_t i) {
  const bool large = c.q.size() > 64 || c.k.size() > 64 || c.v.size() > 64;  // describe prints none past 64
  return describe(c) + (large ? describe_row(c, b, h, i) : "");
}
template std::string describe_failure(const Case<float>&, int64_t, int64_t, int64_t);
template std::string describe_failure(const Case<double>&, int64_t, int64_t, int64_t);

// ... with the first failing element's row.
template <class T>
std::string describe_failure(const Case<T>& c, const Comparison& failed) {
  const Mismatch& m = failed.mismatches.empty() ? failed.worst : failed.mismatches.front();
  return m.rank >= 3 ? describe_failure(c, m.at[0], m.at[1], m.at[2]) : describe(c);
}

template <class T>
void require_agreement(Checker& check, const Case<T>& c, const std::vector<T>& out, Reference reference,
                       const std::string& claim, const std::vector<T>* lse, const std::vector<uint8_t>* keep) {
  const Problem<T> problem = keep ? with_keep(c, *keep) : c.problem();
  std::vector<T> plain(out.size()), plain_lse(size_t(c.shape.lse_size()));
  attention(problem, Result<T>{plain.data(), nullptr, plain_lse.data()});
  const Verdict verdict = judge_rows(problem, out.data(), plain.data(), reference);
  check.observe(verdict.bound);
  if (!verdict.ok()) check.fail(claim + ": " + verdict.report() + describe_failure(c, verdict.bound));
  if (!lse) return;
  const Verdict lse_verdict = judge(lse->data(), plain_lse.data(), reference.lse);  // the rows out's verdict computed
  check.observe(lse_verdict.bound);
  if (!lse_verdict.ok()) check.fail(claim + " (its log-sum-exp): " + lse_verdict.report() + describe_failure(c, lse_verdict.bound));
}

template Checker::Gradients<float> Checker::gradients(const Case<float>&, const GradReference<float>&,
                                                      const std::vector<float>&);
template Checker::Gradients<double> Checker::gradients(const Case<double>&, const GradReference<double>&,
                                                       const std::vector<double>&);
template void require_gradients(Checker&, const Case<float>&, const Checker::Gradients<float>&, const GradReference<float>&,
                                const std::vector<float>&, const std::string&);
template void require_gradients(Checker&, const Case<double>&, const Checker::Gradients<double>&,
                                const GradReference<double>&, const std::vector<double>&, const std::string&);
template Case<float> Checker::draw(CaseLimits);
template Case<double> Checker::draw(CaseLimits);
template void require_agreement(Checker&, const Case<float>&, const std::vector<float>&, Reference, const std::string&,
                                const std::vector<float>*, const std::vector<uint8_t>*);
template void require_agreement(Checker&, const Case<double>&, const std::vector<double>&, Reference, const std::string&,
                                const std::vector<double>*, const std::vector<uint8_t>*);

std::vector<float> forbidden_poisons(const Checker& check, Format format) {
  const double largest = visit_format(format, [](auto zero) { return Precision<decltype(zero)>::largest_finite; });
  const float big = float(largest / 2), huge = float(std::min(1e30, largest));
  if (check.policies().masked_inputs == MaskedInputs::finite) return {huge, -huge, big, -big};
  const float inf = std::numeric_limits<float>::infinity();
  return {std::numeric_limits<float>::quiet_NaN(), inf, -inf, float(round_to(format, 1e30)), float(round_to(format, -1e30))};
}

}  // namespace attncheck
