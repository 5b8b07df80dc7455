// Claim: a permitted key whose score is -inf (an inf in q or k) gets weight 0, as a forbidden one
// does, and a row whose every permitted score is -inf counts as a row with no permitted key: out
// 0 and lse -inf under the zero policy, NaN under nan (docs/contract.md, "Softmax"). A kernel that
// takes the row maximum m = -inf and computes exp(s - m) gets exp(-inf + inf) = NaN there. The
// generator rarely makes a score -inf (only arbitrary bit patterns do), so fixed cases, in every
// float format the kernel claims: found on the first run whatever the seed.
#include <limits>

#include "attncheck/features.hpp"
#include "attncheck/property.hpp"

namespace attncheck::properties {
namespace {

// B 1, H 1, Tq 2, dk 2, dv 2 in `format`: q [B,H,Tq,dk] positive (1, 1), (1, 2), (1, 1), ..., so
// that key j with k = (-inf, 1) scores -inf for every query; keys j < minus_infinite score -inf, the
// others (k = (1, 0) and (0, 1) in turn) finite. v [B,H,Tk,dv]: e_1, e_2, (1, 1), ... by key. A
// kernel that takes only square or causal calls gets Tq = Tk and its causal mode (query 0 then sees
// key 0 alone: with one -inf key, an empty row too).
Case<float> with_infinite_keys(const Checker& check, Format format, int64_t Tk, int64_t minus_infinite) {
  const Domain domain = check.domain();
  Case<float> c;
  c.shape = {1, 1, domain.square() || !domain.causal_optional() ? Tk : 2, Tk, 2, 2};
  c.causal = open_causal(domain);
  c.format = format;
  check.follow_policies(c);  // a row of -inf scores is empty
  c.mix = std::to_string(minus_infinite) + " of " + std::to_string(Tk) + " keys scoring -inf";
  for (int64_t i = 0; i < c.shape.Tq; ++i) c.q.insert(c.q.end(), {1, float(1 + i % 2)});
  for (int64_t j = 0; j < Tk; ++j) {
    const bool infinite = j < minus_infinite;
    c.k.insert(c.k.end(),
               {infinite ? -std::numeric_limits<float>::infinity() : float(j % 2 == 0), infinite ? 1.0f : float(j % 2)});
    c.v.insert(c.v.end(), {j % 3 == 1 ? 0.0f : 1.0f, j % 3 == 0 ? 0.0f : 1.0f});
  }
  return c;
}

}  // namespace

ATTNCHECK_PROPERTY(ANegativeInfiniteScoreWeighsNothing, .order = 179, .catches = "max_minus_infinity_nan", .generated = false,
                   .leaves = ATTNCHECK_ONLY_WITHIN_LIMITS) {
  for (const Format format : {Format::f32, Format::f16, Format::bf16}) {
    if (!check.claims(capability_of(format))) continue;
    // One key of three scoring -inf, then every key of two: the row is empty.
    for (const auto& [Tk, minus_infinite] : {std::pair<int64_t, int64_t>{3, 1}, {2, 2}}) {
      const Case<float> c = with_infinite_keys(check, format, Tk, minus_infinite);
      std::vector<float> lse;
      const std::vector<float> out = check.run_with_lse(c, lse);
      require_agreement(check, c, out, reference(c.problem()),
                        std::to_string(minus_infinite) + " of " + std::to_string(Tk) + " keys scoring -inf", lse_if_any(lse));
    }
  }
}

}  // namespace attncheck::properties
