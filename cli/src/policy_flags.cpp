#include "attncheck/policy_flags.hpp"

#include <vector>

namespace attncheck {

Flags& policy_flags(Flags& flags, bool drawn) {
  for (const Policy& p : kPolicies) {
    if (p.drawn && !drawn) continue;
    std::vector<std::string> words;
    std::string help = "a convention the kernel is checked against, relaxing the rule that " + std::string(p.rule) + ":";
    for (int c = 0; c < p.count; ++c) {
      words.push_back(p.choices[c].word);
      help += std::string(c ? ";" : "") + " " + p.choices[c].word + ", " + p.choices[c].meaning;
    }
    flags.choice(p.flag, words, help, p.choices[0].word);
  }
  return flags;
}

void read_policy_flags(const FlagValues& given, Policies& policies) {
  for (const Policy& p : kPolicies)
    if (given.given(p.flag))  // a flag not declared (compare's --masked-inputs) is never given
      p.set(policies, *policy_choice(p, given.text(p.flag)));
}

}  // namespace attncheck
