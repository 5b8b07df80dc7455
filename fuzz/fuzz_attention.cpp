// fuzz_attention checks the kernel under test ($ATTNCHECK_IMPL=plugin.so, else the built-in
// implementation) on cases draw_case decodes from the input: B and H up to 2, Tq, Tk, dk and dv up
// to 8, Tq != Tk, every value mix (ties, normal, wide logits past +-88 and +-1e4, tiny and
// subnormal, arbitrary bits), allow masks of every density with emptied rows, key padding, both
// causal alignments, and, where the kernel takes them, a bias with -inf and finite sentinels and
// both empty-row policies; float, and double when the kernel has it. Two claims: the output agrees
// with the oracle within its bound; and poisoning the keys and values one query may not see (NaN,
// +-inf, +-1e30) leaves that query's outputs unchanged in every head where it has a permitted key
// (compare.hpp's rule: any NaN equals any NaN, bits otherwise).
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "attncheck/compare.hpp"
#include "attncheck/kernel.hpp"
#include "attncheck/oracle.hpp"
#include "fuzz_input.hpp"

namespace attncheck::fuzz {
namespace {

template <class T>
void check(const Kernel& kernel, const AttentionInput<T>& in) {
  // in.c: Q [B,H,Tq,dk], K [B,H,Tk,dk], V [B,H,Tk,dv], masks; out and dirty: [B,H,Tq,dv].
  const Case<T>& c = in.c;
  const Shape& s = c.shape;
  std::vector<T> out, dirty;
  if (showing())
    std::fprintf(stderr, "%sintervention: query %lld of batch %lld\n", describe(c).c_str(), (long long)in.i,
                 (long long)in.b);
  if (const int32_t status = run_kernel(kernel, c, out); status != 0)
    finding(kernel.plugin.name + " refused a valid problem (status " + std::to_string(status) + ")\n" + describe(c));
  // The rigorous gate only (docs/fuzzing.md: the precision gate's limit is empirical, and an
  // adversarial search could push a correct kernel past it).
  if (const Comparison result = compare(out.data(), reference(c.problem()), s); !result.ok())
    finding(kernel.plugin.name + " disagrees with the oracle: wrong: " + result.report(Arithmetic::of<T>().label) +
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
    finding(kernel.plugin.name + " refused a valid problem (status " + std::to_string(status) + ")\n" +
            describe(poisoned));
  for (int64_t h = 0; h < s.H; ++h) {
    if (exact_row(c.problem(), in.b, h, in.i).keys.empty()) continue;  // an empty row: the policy's, checked above
    for (int64_t col = 0; col < s.dv; ++col) {
      const size_t at = size_t(s.out_at(in.b, h, in.i) + col);
      if (!unchanged(out[at], dirty[at]))
        finding(kernel.plugin.name + ": out[" + std::to_string(in.b) + "," + std::to_string(h) + "," +
                std::to_string(in.i) + "," + std::to_string(col) + "] changed from " + show(out[at]) + " to " +
                show(dirty[at]) + " when only keys and values query " + std::to_string(in.i) +
                " may not see were poisoned\n" + describe(poisoned));
    }
  }
}

}  // namespace
}  // namespace attncheck::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace attncheck;
  const Kernel& kernel = kernel_from_environment();
  fuzz::BytesChooser choose(data, size);
  fuzz::read_attention_input(choose, kernel.limits(fuzz::kAttentionLimits), kernel.plugin.forward_f64 != nullptr,
                             [&](const auto& in) { fuzz::check(kernel, in); });
  return 0;
}
