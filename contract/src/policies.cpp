#include "attncheck/policies.hpp"

#include <stdexcept>

namespace attncheck {

const Policy* policy_named(std::string_view flag) {
  for (const Policy& p : kPolicies)
    if (flag == p.flag) return &p;
  return nullptr;
}

const Policy& policy(std::string_view flag) {
  if (const Policy* p = policy_named(flag)) return *p;
  throw std::logic_error("no policy " + std::string(flag));
}

std::string choices_text(const Policy& policy) {
  std::string text;
  for (int c = 0; c < policy.count; ++c)
    text += std::string(c == 0 ? "" : c + 1 == policy.count ? " or " : ", ") + policy.choices[c].word;
  return text;
}

const char* policy_word(const Policy& policy, const Policies& policies) { return policy.choices[policy.get(policies)].word; }

std::optional<int> policy_choice(const Policy& policy, std::string_view word) {
  for (int c = 0; c < policy.count; ++c)
    if (word == policy.choices[c].word) return c;
  return std::nullopt;
}

std::string policies_text(const Policies& policies) {
  std::string text;
  for (const Policy& p : kPolicies) text += (text.empty() ? "" : ", ") + std::string(p.flag) + " " + policy_word(p, policies);
  return text;
}

std::string relaxed_text(const Policies& policies) {
  std::string text;
  for (const Policy& p : kPolicies)
    if (p.get(policies) != 0)
      text += (text.empty() ? "--" : "; --") + std::string(p.flag) + " " + policy_word(p, policies) + " (" +
              p.choices[p.get(policies)].meaning + ", relaxing: " + p.rule + ")";
  return text;
}

std::string relaxed_flags(const Policies& policies) {
  std::string text;
  for (const Policy& p : kPolicies)
    if (p.get(policies) != 0) text += (text.empty() ? "--" : " --") + std::string(p.flag) + " " + policy_word(p, policies);
  return text;
}

int policy_combinations() {
  int n = 1;
  for (const Policy& p : kPolicies) n *= p.count;
  return n;
}

Policies policy_combination(int n) {
  Policies policies;
  for (const Policy& p : kPolicies) {
    p.set(policies, n % p.count);
    n /= p.count;
  }
  return policies;
}

int relaxed_count(const Policies& policies) {
  int n = 0;
  for (const Policy& p : kPolicies) n += p.get(policies) != 0;
  return n;
}

const char* empty_rows_word(EmptyRows e) {
  Policies p;
  p.empty_rows = e;
  return policy_word(policy("empty-rows"), p);
}

}  // namespace attncheck
