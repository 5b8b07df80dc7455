#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

template <class T>
void Checker::lacks(const Call<T>& call) {
  // A layer call's case out [B,Tq,D], weights [B,H,Tq,Tk]; a forward's and a backward's out
  // [B,H,Tq,dv], lse [B,H,Tq], keep [B,H,Tq,Tk], dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv].
  if (call.kind == CallKind::layer) fail("the implementation has no multi-head layer\n" + describe(*call.layer));
  const Case<T>& c = *call.forward;
  if (call.kind == CallKind::backward) fail("the implementation has no backward\n" + describe(c));
  if (call.asks(slot::KEEP)) fail("the implementation writes no dropout keep mask\n" + describe(c));
  fail("the implementation returns no log-sum-exp\n" + describe(c));
  std::abort();  // not reached: fail() is [[noreturn]], but through a virtual call the compiler cannot know it
}
template void Checker::lacks(const Call<float>&);
template void Checker::lacks(const Call<double>&);

template <class T>
Grads<T> gradients_into(const Call<T>& call, Results<T>& results) {
  // dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv] out; the call's out and dout [B,H,Tq,dv], lse [B,H,Tq] in.
  const Shape& s = call.forward->shape;
  const T nan = std::numeric_limits<T>::quiet_NaN();  // unwritten gradients fail
  results.tensor[slot::DQ].assign(size_t(s.q_size()), nan);
  results.tensor[slot::DK].assign(size_t(s.k_size()), nan);
  results.tensor[slot::DV].assign(size_t(s.v_size()), nan);
  return Grads<T>{call.out,
                  call.lse,
                  call.dout,
                  results.tensor[slot::DQ].data(),
                  results.tensor[slot::DK].data(),
                  results.tensor[slot::DV].data()};
}
template Grads<float> gradients_into(const Call<float>&, Results<float>&);
template Grads<double> gradients_into(const Call<double>&, Results<double>&);

template <class T>
void require_gradients(Checker& check, const Case<T>& c, const Checker::Gradients<T>& computed, const GradReference<T>& reference,
                       const std::vector<T>& dout, const std::string& claim) {
  const Shape& s = c.shape;
  Checker::Gradients<T> plain{std::vector<T>(size_t(s.q_size())), std::vector<T>(size_t(s.k_size())),
                              std::vector<T>(size_t(s.v_size()))};
  attention_backward(c.problem(), Grads<T>{reference.out.data(), reference.lse.data(), dout.data(), plain.dq.data(),
                                           plain.dk.data(), plain.dv.data()});
  const std::pair<const std::vector<T>*, std::pair<const std::vector<T>*, const ExactTensor*>> tensors[] = {
      {&computed.dq, {&plain.dq, &reference.dq}},
      {&computed.dk, {&plain.dk, &reference.dk}},
      {&computed.dv, {&plain.dv, &reference.dv}}};
  for (const auto& [kernel, expected] : tensors) {
    const Verdict verdict = judge(kernel->data(), expected.first->data(), *expected.second);
    check.observe(verdict.bound);
    if (!verdict.ok()) check.fail(claim + ": " + verdict.report() + describe(c));
  }
}

std::optional<ShiftedCase> with_scores_shifted(const Checker& check, const Case<float>& c, double a) {
  // c's q [B,H,Tq,dk] and k [B,H_kv,Tk,dk] in; the shifted case's, [..,width], out (v [..,width] too under dk = dv).
  const Shape& s = c.shape;
  const Domain domain = check.domain();
  int64_t width = s.dk + 1;
  while (!domain.limits.takes_width(width))
    if (++width > std::max<int64_t>(4 * s.dk, 256)) return std::nullopt;
  Case<float> shifted = domain.only(ATTNCHECK_ONLY_EQUAL_HEAD_DIMS) ? with_value_width(c, width) : c;
  shifted.shape.dk = width;
  if (!domain.only(ATTNCHECK_ONLY_DEFAULT_SCALE)) shifted.scale = effective_scale(s, c.scale);
  const double scale = effective_scale(shifted.shape, shifted.scale);
  float appended = float(round_to(c.format, a / scale));
  for (; !std::isfinite(appended); a /= 10) appended = float(round_to(c.format, a / 10 / scale));
  auto widened = [&](const std::vector<float>& x, int64_t rows, float last) {  // [rows, dk] to [rows, width]
    std::vector<float> y(size_t(rows * width), 0.0f);
    for (int64_t row = 0; row < rows; ++row) {
      std::copy_n(x.begin() + row * s.dk, s.dk, y.begin() + row * width);
      y[size_t(row * width + width - 1)] = last;
    }
    return y;
  };
  Case<float> unshifted = shifted;
  shifted.q = widened(c.q, s.B * s.H * s.Tq, appended);
  shifted.k = widened(c.k, s.B * s.kv_heads() * s.Tk, 1);
  unshifted.q = widened(c.q, s.B * s.H * s.Tq, 0);
  unshifted.k = widened(c.k, s.B * s.kv_heads() * s.Tk, 0);
  return ShiftedCase{std::move(shifted), std::move(unshifted), scale * appended};
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
void require_agreement(Checker& check, const Case<T>& c, const std::vector<T>& out, Reference reference, const std::string& claim,
                       const std::vector<T>* lse, const std::vector<uint8_t>* keep) {
  const Case<T> twin = dense_twin(c);  // a paged or varlen case judged as its dense twin, reported as itself
  const Problem<T> problem = keep ? with_keep(twin, *keep) : twin.problem();
  std::vector<T> plain(out.size()), plain_lse(size_t(c.shape.lse_size()));
  attention(problem, Result<T>{plain.data(), nullptr, plain_lse.data()});
  const Verdict verdict = judge_rows(problem, out.data(), plain.data(), reference);
  check.observe(verdict.bound);
  if (!verdict.ok()) check.fail(claim + ": " + verdict.report() + describe_failure(c, verdict.bound));
  if (!lse) return;
  const Verdict lse_verdict = judge(lse->data(), plain_lse.data(), reference.lse);  // the rows out's verdict computed
  check.observe(lse_verdict.bound);
  if (!lse_verdict.ok())
    check.fail(claim + " (its log-sum-exp): " + lse_verdict.report() + describe_failure(c, lse_verdict.bound));
}

template void require_gradients(Checker&, const Case<float>&, const Checker::Gradients<float>&, const GradReference<float>&,
                                const std::vector<float>&, const std::string&);
template void require_gradients(Checker&, const Case<double>&, const Checker::Gradients<double>&, const GradReference<double>&,
                                const std::vector<double>&, const std::string&);
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

Causal open_causal(const Domain& domain) {
  if (domain.causal_optional()) return Causal::none;
  return domain.causal_alignment();
}

template <class T>
Case<T> with_last_query(const Checker& check, Case<T> c) {
  // c: q [B,H,1,dk], allow [B,1,Tk], bias [B,H,1,Tk] in; q [B,H,Tk,dk], allow [B,Tk,Tk], bias
  // [B,H,Tk,Tk] out when the domain wants it square.
  const Domain domain = check.domain();
  c.causal = open_causal(domain);
  const Shape s = c.shape;
  if (!(domain.square() || c.causal == Causal::upper_left) || s.Tq == s.Tk) return c;
  auto repeated = [&](const auto& x, int64_t matrices, int64_t width) {
    std::decay_t<decltype(x)> y;
    for (int64_t m = 0; m < matrices && !x.empty(); ++m)
      for (int64_t i = 0; i < s.Tk; ++i) y.insert(y.end(), x.begin() + m * width, x.begin() + (m + 1) * width);
    return y;
  };
  c.shape.Tq = s.Tk;
  c.q = repeated(c.q, s.B * s.H, s.dk);
  c.allow = repeated(c.allow, s.B, s.Tk);
  c.bias = repeated(c.bias, s.B * s.H, s.Tk);
  return c;
}
template Case<float> with_last_query(const Checker&, Case<float>);
template Case<double> with_last_query(const Checker&, Case<double>);

template <class T>
Case<T> with_value_width(Case<T> c, int64_t dv) {
  // c's v [B,H_kv,Tk,dv0] in, [B,H_kv,Tk,dv] out, the new columns 0.
  const Shape s = c.shape;
  const std::vector<T> v = std::move(c.v);
  c.shape.dv = dv;
  c.v.assign(size_t(c.shape.v_size()), T(0));
  for (int64_t row = 0; row < s.B * s.kv_heads() * s.Tk; ++row)
    std::copy_n(v.begin() + row * s.dv, std::min(s.dv, dv), c.v.begin() + row * dv);
  return c;
}
template Case<float> with_value_width(Case<float>, int64_t);
template Case<double> with_value_width(Case<double>, int64_t);

namespace {

// The value width that reads the weights of `keys` keys in as few calls as the domain lets: Tk
// itself, else the narrowest it takes above Tk, else the widest below (dk under dk = dv).
int64_t reading_width(const Shape& s, const Domain& domain) {
  if (domain.only(ATTNCHECK_ONLY_EQUAL_HEAD_DIMS)) return s.dk;
  const Limits& l = domain.limits;
  if (l.takes_width(s.Tk)) return s.Tk;
  const std::vector<int64_t> widths = drawable_widths(l, std::max<int64_t>(s.Tk, 256));
  for (int64_t w : widths)
    if (w > s.Tk) return w;
  return widths.back();
}

}  // namespace

ReadWeights read_weights(Checker& check, const Case<float>& c) {
  // c: q [B,H,Tq,dk], k [B,H_kv,Tk,dk] in; the weights [B,H,Tq,Tk] out, through calls with v
  // [B,H_kv,Tk,width] and out [B,H,Tq,width].
  const Shape& s = c.shape;
  const int64_t width = reading_width(s, check.domain());
  ReadWeights read{std::vector<float>(size_t(s.scores_size())),
                   std::vector<long double>(size_t(s.scores_size())),
                   std::vector<double>(size_t(s.scores_size())),
                   {}};
  for (int64_t first = 0; first < s.Tk; first += width) {  // keys [first, first + width) in this call
    Case<float> block = c;
    block.shape.dv = width;
    block.v.assign(size_t(block.shape.v_size()), 0.0f);
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t g = 0; g < s.kv_heads(); ++g)
        for (int64_t j = first; j < std::min(s.Tk, first + width); ++j)
          block.v[size_t(block.shape.v_at(b, g * (s.H / s.kv_heads()), j) + (j - first))] = 1;
    const std::vector<float> out = check.run(block);
    const Reference ref = reference(block.problem());
    for (int64_t row = 0; row < s.B * s.H * s.Tq; ++row)
      for (int64_t j = first; j < std::min(s.Tk, first + width); ++j) {
        const size_t at = size_t(row * width + (j - first)), to = size_t(row * s.Tk + j);
        read.w[to] = out[at];
        read.exact[to] = ref.out.exact[at];
        read.bound[to] = ref.out.bound[at];
      }
    read.calls.push_back(std::move(block));
  }
  return read;
}

bool keeps_bits(const std::vector<float>& before, const std::vector<float>& after, const std::vector<size_t>& claimed) {
  for (const size_t at : claimed)
    if (!unchanged(before[at], after[at])) return false;
  return true;
}

std::optional<std::string> answers_vary(const Rerun& first_call, const std::vector<float>& first, const Rerun& changed_call,
                                        const std::vector<float>& changed, const std::vector<size_t>& claimed) {
  constexpr int kRepeats = 30;
  for (int n = 0; n < kRepeats; ++n) {
    const bool changed_turn = n % 2 == 0;  // the changed call first: a kernel that alternates differs at once
    const std::vector<float> again = changed_turn ? changed_call() : first_call();
    const std::vector<float>& before = changed_turn ? changed : first;
    for (const size_t at : claimed)
      if (!unchanged(before[at], again[at]))
        return "element " + std::to_string(at) + " was " + show(before[at]) + ", then " + show(again[at]);
  }
  return std::nullopt;
}

}  // namespace attncheck
