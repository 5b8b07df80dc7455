// Policies: a runtime's documented conventions that a kernel may be checked against in place of the
// strict contract. Each relaxes one rule, by name, and a verdict says which it assumed (the summary,
// the reports, the replay file and the case text all carry them). One table: a policy is a row (its
// flag, the rule it relaxes, its choices with what each means), and everything that names one (the
// flags, the texts, the checks) comes from it. docs/contract.md, "Policies".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace attncheck {

// The output of a query row with no permitted key: zero (out 0, and lse -inf or, under
// LseEmpty::zero, 0), nan (out NaN, lse NaN), mean (out the mean of its KV head's values over all
// Tk keys, what a finite mask value gives; its lse unchecked), any (out and lse unchecked; every
// other row still is).
enum class EmptyRows { zero, nan, mean, any };
// The log-sum-exp of an empty row under EmptyRows::zero: -inf (ninf), or 0 (PyTorch's CPU flash kernel).
enum class LseEmpty { ninf, zero };
// What the checker may put where no query may look (a forbidden key's k or v, a masked bias, a
// query whose row is empty): anything (NaN and inf too), or finite values only (extremes still:
// +-1e30, +-FLT_MAX/2, values whose scores overflow).
enum class MaskedInputs { any, finite };

// The policies one check runs under; the default is the strict contract.
struct Policies {
  EmptyRows empty_rows = EmptyRows::zero;
  LseEmpty lse_empty = LseEmpty::ninf;
  MaskedInputs masked_inputs = MaskedInputs::any;
  bool operator==(const Policies&) const = default;
};

// One choice of a policy: its word on the command line and in files, and what it means.
struct PolicyChoice {
  const char* word;
  const char* meaning;
};

// One policy: its flag (also its key in files and reports), the rule of the strict contract it
// relaxes, and its choices, the first the default.
struct Policy {
  const char* flag;
  const char* rule;
  PolicyChoice choices[4];
  int count;
  bool drawn;  // about what the checker draws (a check's; compare takes the files as they are)
  // The choice `policies` makes of it (an index into choices), and sets it.
  int (*get)(const Policies&);
  void (*set)(Policies&, int);
};

inline constexpr Policy kPolicies[] = {
    {"empty-rows",
     "a row with no permitted key gives 0 (its lse -inf)",
     {{"zero", "a row with no permitted key gives 0"},
      {"nan", "a row with no permitted key gives NaN (its lse NaN)"},
      {"mean", "a row with no permitted key gives the mean of its values over all keys (its lse unchecked)"},
      {"any", "a row with no permitted key is not checked (its lse neither)"}},
     4,
     false,
     [](const Policies& p) { return int(p.empty_rows); },
     [](Policies& p, int c) { p.empty_rows = EmptyRows(c); }},
    {"lse-empty",
     "the log-sum-exp of a row with no permitted key is -inf",
     {{"ninf", "an empty row's log-sum-exp is -inf"}, {"zero", "an empty row's log-sum-exp is 0"}},
     2,
     false,
     [](const Policies& p) { return int(p.lse_empty); },
     [](Policies& p, int c) { p.lse_empty = LseEmpty(c); }},
    {"masked-inputs",
     "a NaN or inf where no query may look changes nothing",
     {{"any", "inputs no query may see may hold NaN and inf"},
      {"finite", "NaN and inf only where every query looks (drawn cases finite; extremes still)"}},
     2,
     true,
     [](const Policies& p) { return int(p.masked_inputs); },
     [](Policies& p, int c) { p.masked_inputs = MaskedInputs(c); }},
};

const Policy& policy(std::string_view flag);        // throws std::logic_error for no such policy
const Policy* policy_named(std::string_view flag);  // null for no such policy
std::string choices_text(const Policy& policy);     // "zero, nan, mean or any"
// The word of `policy`'s choice in `policies` ("zero"), and the choice a word names (none: not one).
const char* policy_word(const Policy& policy, const Policies& policies);
std::optional<int> policy_choice(const Policy& policy, std::string_view word);
// "empty-rows zero, lse-empty ninf, masked-inputs any": every policy, as a verdict says what it assumed.
std::string policies_text(const Policies& policies);
// The policies that differ from the strict contract, each with the rule it relaxes:
// "--empty-rows mean (relaxes: a row with no permitted key gives 0 (its lse -inf))"; empty for none.
std::string relaxed_text(const Policies& policies);
// The flags of the policies that differ from the strict contract: "--empty-rows mean --masked-inputs
// finite"; empty for none.
std::string relaxed_flags(const Policies& policies);
// Every combination of the policies' choices, numbered 0 (the strict contract) to
// policy_combinations() - 1, the first policy's choice varying fastest.
int policy_combinations();
Policies policy_combination(int n);
// How many rules `policies` relaxes (its choices other than the first).
int relaxed_count(const Policies& policies);

// The words of the EmptyRows choices, as the case text and the Python client spell them.
const char* empty_rows_word(EmptyRows e);

}  // namespace attncheck
