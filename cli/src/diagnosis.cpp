#include "attncheck/diagnosis.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "attncheck/case_shrink.hpp"
#include "attncheck/features.hpp"
#include "attncheck/policies.hpp"

namespace attncheck {
namespace {

// An outcome that says nothing of the kernel: a call it could not take, or one the budget stopped.
bool unknown(const Outcome& outcome) { return outcome.kind == Outcome::not_taken || outcome.kind == Outcome::out_of_budget; }

// Whether the kernel gets c right: no fault, and its results within the bound; nothing when the
// call said nothing (unknown).
template <class T>
std::optional<bool> right_on(IsolatedKernel& kernel, const Case<T>& c, bool with_lse) {
  std::vector<T> out, lse;
  const Outcome outcome = kernel.run(c, out, with_lse ? &lse : nullptr);
  if (unknown(outcome)) return std::nullopt;
  return outcome.kind == Outcome::ok && judged(c, out, lse).ok();
}

// Whether a and b hold the same inputs, bit for bit (NaN included).
template <class T>
bool same_inputs(const Case<T>& a, const Case<T>& b) {
  auto same = [](const std::vector<T>& x, const std::vector<T>& y) {
    return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0);
  };
  return same(a.q, b.q) && same(a.k, b.k) && same(a.v, b.v) && same(a.bias, b.bias);
}

// Whether row (b, h, i) of c may see a key: one the masks permit and no -inf bias forbids.
template <class T>
bool sees_a_key(const Case<T>& c, int64_t b, int64_t h, int64_t i) {
  for (int64_t j = 0; j < c.shape.Tk; ++j)
    if (c.permits(b, i, j) &&
        (c.bias.empty() || c.bias[size_t(c.shape.scores_at(b, h, i) + j)] != -std::numeric_limits<T>::infinity()))
      return true;
  return false;
}

// Whether the inputs of c that `clean` zeroes (those no query may see) hold a NaN, an inf or an
// extreme: what the properties poison with, unlike the ordinary numbers a drawn case holds there.
template <class T>
bool unseen_extreme(const Case<T>& c, const Case<T>& clean) {
  auto extreme = [](T x) { return !std::isfinite(x) || std::fabs(x) >= T(1e4); };
  for (size_t n = 0; n < c.k.size(); ++n)
    if (c.k[n] != clean.k[n] && extreme(c.k[n])) return true;
  for (size_t n = 0; n < c.v.size(); ++n)
    if (c.v[n] != clean.v[n] && extreme(c.v[n])) return true;
  return false;
}

std::string joined(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& w : words) text += (text.empty() ? "" : ", ") + w;
  return text;
}

// The call c once more, and what its variants show; `call` is how the kernel did on c itself.
template <class T>
void diagnose_call(IsolatedKernel& kernel, const CampaignOptions& options, const Case<T>& c, bool with_lse, Diagnosis& d) {
  std::vector<T> out, lse;
  const Outcome outcome = kernel.run(c, out, with_lse ? &lse : nullptr);
  if (unknown(outcome)) return;  // nothing to say of it
  if (outcome.kind != Outcome::ok) {
    d.fault = outcome.kind;
  } else {
    const Comparison compared = judged(c, out, lse);
    // Right this time, or the next (a kernel that alternates): the same inputs gave a wrong answer,
    // or a fault, before; what its variants show would say no more.
    if (compared.ok() || right_on(kernel, c, with_lse).value_or(false)) {
      d.varies = true;
      return;
    }
    d.wrong = true;
    d.element = compared.special ? compared.first_special : compared.worst;
  }
  const Shape& s = c.shape;
  d.shape = "B " + std::to_string(s.B) + " H " + std::to_string(s.H) + " H_kv " + std::to_string(s.kv_heads()) + " Tq " +
            std::to_string(s.Tq) + " Tk " + std::to_string(s.Tk) + " dk " + std::to_string(s.dk) + " dv " + std::to_string(s.dv);
  for (const WithoutFeature<T>& without : without_each_feature(c, kernel.capabilities(), kernel.domain())) {
    const std::optional<bool> right = right_on(kernel, without.c, with_lse);
    if (!right) continue;  // the variant said nothing: the feature is neither needed nor not
    d.features.push_back(without.name);
    if (*right) d.needs.push_back(without.name);
  }
  // A wrong valid row (one that sees a key) that is right once no unseen input holds anything: an
  // empty row's value comes from unseen inputs by its nature (the mean of V), so it is never this.
  const Case<T> clean = with_unseen_inputs(c, Unseen::zero);
  d.poisoned = d.wrong && sees_a_key(c, d.element.at[0], d.element.at[1], d.element.at[2]) && !same_inputs(clean, c) &&
               right_on(kernel, clean, with_lse).value_or(false);
  d.extreme = d.poisoned && unseen_extreme(c, clean);
  // Every combination of policies that accepts the call: the same results judged by its rules, or
  // the call run again (once) on the inputs --masked-inputs finite would send.
  std::optional<bool> finite_run;
  std::vector<T> finite_out, finite_lse;
  for (int n = 0; n < policy_combinations(); ++n) {
    const Policies other = policy_combination(n);
    if (other == options.policies) continue;
    Case<T> under = c;
    under.empty_rows = other.empty_rows;
    under.lse_empty = other.lse_empty;
    if (other.masked_inputs == MaskedInputs::finite) under = with_unseen_inputs(std::move(under), Unseen::finite);
    bool accepts = false;
    if (same_inputs(under, c)) {
      accepts = outcome.kind == Outcome::ok && judged(under, out, lse).ok();
    } else {
      // A call not taken accepts nothing: the finding stays a bug rather than hide behind a policy.
      if (!finite_run) finite_run = kernel.run(under, finite_out, with_lse ? &finite_lse : nullptr).kind == Outcome::ok;
      accepts = *finite_run && judged(under, finite_out, finite_lse).ok();
    }
    if (accepts) d.accepting |= 1u << n;
  }
  // Each policy changed alone, its first choice that accepts: what the finding's report names.
  for (const Policy& policy : kPolicies)
    for (int choice = 0; choice < policy.count; ++choice) {
      Policies other = options.policies;
      policy.set(other, choice);
      int n = 0;
      while (policy_combination(n) != other) ++n;
      if (other == options.policies || !(d.accepting & (1u << n))) continue;
      d.accepted_under.push_back(std::string("--") + policy.flag + " " + policy.choices[choice].word);
      break;
    }
}

}  // namespace

std::string Diagnosis::failure() const {
  if (!*this) return "";
  const std::string how = fault >= 0          ? "fault " + std::to_string(fault)
                          : poisoned          ? "poisoned"
                          : element.special() ? "special"
                                              : "value";
  return how + (element.tensor && wrong ? std::string(" ") + element.tensor : "");
}

bool Diagnosis::same_bug(const Diagnosis& other) const {
  if (failure().empty() || failure() != other.failure()) return false;
  if (needs == other.needs) return true;
  for (const std::string& feature :
       needs)  // a feature both need: the rest may be incidental (a scale that moves a rounding error)
    if (std::find(other.needs.begin(), other.needs.end(), feature) != other.needs.end()) return true;
  return false;
}

void diagnose(IsolatedKernel& kernel, const CampaignOptions& options, Finding& finding) {
  finding.diagnosis = {};
  if (finding.failed_call.empty() || finding.failed_call_why.empty()) return;
  visit_case_text(finding.failed_call, [&](const auto& c) {
    diagnose_call(kernel, options, c, finding.failed_call_lse, finding.diagnosis);
    return 0;
  });
}

std::string diagnosis_text(const Diagnosis& d) {
  std::string text;
  if (d.varies) text += "answers vary between identical calls: the failed call, run again, was right\n";
  if (!d.needs.empty()) text += "fails only with: " + joined(d.needs) + "\n";
  std::vector<std::string> also;
  for (const std::string& f : d.features)
    if (std::find(d.needs.begin(), d.needs.end(), f) == d.needs.end()) also.push_back(f);
  if (!also.empty()) text += "fails without each of these as well: " + joined(also) + "\n";
  if (d.poisoned)
    text += d.extreme ? "passes once the inputs no query may see are 0: a NaN, inf or extreme there changed it\n"
                      : "passes once the inputs no query may see are 0: it reads keys or values a query may not see "
                        "(a mask ignored or leaking)\n";
  if (!d.accepted_under.empty()) text += "accepted under: " + joined(d.accepted_under) + "\n";
  if (!d.cause.empty()) text += "cause: " + d.cause + "\n";
  return text;
}

}  // namespace attncheck
