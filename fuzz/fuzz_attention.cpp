// fuzz_attention checks the kernel under test ($ATTNCHECK_IMPL=plugin.so, else the built-in
// implementation) on cases draw_case decodes from the input: B and H up to 2, Tq, Tk, dk and dv up
// to 8, Tq != Tk, every value mix (ties, normal, wide logits past +-88 and +-1e4, tiny and
// subnormal, arbitrary bits), and every feature the kernel claims (feature table): allow masks of
// every density with emptied rows, key lengths, both causal alignments, grouped KV heads, windows,
// soft-caps, a bias with -inf and finite sentinels, every format it claims; both empty-row
// policies for the built-in implementation. Two claims: the output agrees
// with the oracle within its bound; and poisoning the keys and values one query may not see (NaN,
// +-inf, +-1e30) leaves that query's outputs unchanged in every head where it has a permitted key
// (compare.hpp's rule: any NaN equals any NaN, bits otherwise).
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "attncheck/compare.hpp"
#include "attncheck/domain.hpp"
#include "attncheck/features.hpp"
#include "attncheck/kernel.hpp"
#include "attncheck/oracle.hpp"
#include "fuzz_input.hpp"

namespace attncheck::fuzz {
namespace {

// Why this kernel cannot take case c, or "": a feature it does not claim (the feature table's
// rule, as require_claimed's), a restriction it has (require_in_domain's), or the NaN empty-row
// policy, which only the built-in one follows.
template <class T>
std::string cannot_take(const Kernel& kernel, const Case<T>& c) {
  if (c.empty_rows != EmptyRows::zero && !kernel.full_contract) return "a plugin has only the zero empty-row policy";
  if (c.dropout_p != 0) return "dropout is judged by the dropout properties alone, for the kernel's own mask";
  const CallView call = call_view(c.problem(), false, false);
  if (const uint32_t unclaimed = features_used(call) & ~kernel.claimed()) return "it does not claim " + feature_names(unclaimed);
  if (const uint32_t broken = restrictions_broken(call, kernel.domain())) return "it takes " + restriction_names(broken);
  return "";
}

template <class T>
void check(const Kernel& kernel, const AttentionInput<T>& in) {
  // in.c: Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], masks; out and dirty: [B,H,Tq,dv].
  const Case<T>& c = in.c;
  const Shape& s = c.shape;
  std::vector<T> out, dirty;
  // Only a kept text can hold a case the kernel cannot take (bytes decode within its limits): one
  // kept with the built-in implementation, replayed with a plugin.
  if (const std::string why = cannot_take(kernel, c); !why.empty()) {
    std::fprintf(stderr, "fuzz_attention: skipped: %s cannot take this case (%s)\n", kernel.plugin.name.c_str(), why.c_str());
    return;
  }
  if (showing())
    std::fprintf(stderr, "%sintervention: query %lld of batch %lld\n", describe(c).c_str(), (long long)in.i, (long long)in.b);
  if (const int32_t status = run_kernel(kernel, c, out); status != 0)
    finding(kernel.plugin.name + " refused a valid problem (status " + std::to_string(status) + ")\n" + describe(c));
  // The rigorous gate only (docs/fuzzing.md: the precision gate's limit is empirical, and an
  // adversarial search could push a correct kernel past it).
  if (const Comparison result = compare(out.data(), reference(c.problem()).out); !result.ok())
    finding(kernel.plugin.name + " disagrees with the oracle: wrong: " + result.report(Arithmetic::of(c.format).label) +
            describe(c));

  // The intervention: query (b, i)'s forbidden keys and values, in every head, become poison.
  Case<T> poisoned = c;
  bool any = false;
  for (int64_t j = 0; j < s.Tk; ++j) {
    if (c.permits(in.b, in.i, j)) continue;
    any = true;
    for (int64_t h = 0; h < s.H; ++h) {
      std::fill_n(poisoned.k.begin() + s.k_at(in.b, h, j), s.dk, in.poison[size_t(j)]);
      std::fill_n(poisoned.v.begin() + s.v_at(in.b, h, j), s.dv, in.poison[size_t(j)]);
    }
  }
  if (!any) return;
  if (const int32_t status = run_kernel(kernel, poisoned, dirty); status != 0)
    finding(kernel.plugin.name + " refused a valid problem (status " + std::to_string(status) + ")\n" + describe(poisoned));
  for (int64_t h = 0; h < s.H; ++h) {
    if (exact_row(c.problem(), in.b, h, in.i).keys.empty()) continue;  // an empty row: the policy's, checked above
    for (int64_t col = 0; col < s.dv; ++col) {
      const size_t at = size_t(s.out_at(in.b, h, in.i) + col);
      if (!unchanged(out[at], dirty[at]))
        finding(kernel.plugin.name + ": out[" + std::to_string(in.b) + "," + std::to_string(h) + "," + std::to_string(in.i) +
                "," + std::to_string(col) + "] changed from " + show(out[at]) + " to " + show(dirty[at]) +
                " when only keys and values query " + std::to_string(in.i) + " may not see were poisoned\n" + describe(poisoned));
    }
  }
}

const auto check_input = [](const auto& in) { check(kernel_from_environment(), in); };
// Bytes decode to what the kernel takes: so a plugin's failure is kept (--keep) with the same
// ATTNCHECK_IMPL, or its bytes would decode to another case.
const auto decode = [](Chooser& choose, auto use) {
  const Kernel& kernel = kernel_from_environment();
  read_attention_input(choose, kernel.limits(kAttentionLimits), kernel.plugin.has_f64(), use);
};

}  // namespace
}  // namespace attncheck::fuzz

ATTNCHECK_FUZZ_TARGET(AttentionInput, check_input, decode)
