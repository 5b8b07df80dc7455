// Claim: a NaN or +inf score of a permitted key makes its whole row NaN, every output element and
// the log-sum-exp (the row has no finite softmax); the same key hidden from a row never does (that
// row keeps what it gives with 0 in place of the poison, and agrees with the oracle; a row wrong
// either way is reported as that, not as the poison's doing). A kernel whose empty-row guard reads
// `l > 0 ? acc / l : 0` fails the first half: a NaN score makes l NaN, NaN > 0 is false, and the
// row comes out as an empty one. Fixed cases, in every float format the kernel claims, so that
// swallowing a NaN is found on the first run whatever the seed, not by a lucky draw.

#include <cmath>
#include <limits>

#include "attncheck/abi.hpp"
#include "attncheck/property.hpp"

namespace attncheck::properties {
namespace {

// The key whose k holds the NaN or inf: key 2, which some rows do not see (below), or under
// --masked-inputs finite with a causal mask key 0, which every row sees (a NaN or inf is then
// never where some query may not look).
int64_t poisoned_index(const Checker& check) {
  return check.policies().masked_inputs == MaskedInputs::finite && open_causal(check.domain()) != Causal::none ? 0 : 2;
}

// B 2, H 1, Tq 2, Tk 3, dk 2, dv 2 in `format`, every value exact in it: q [B,H,Tq,dk] positive
// small integers (so that an inf in k scores +inf, not NaN), the keys of k [B,H,Tk,dk] e_1, e_2 and
// (poison, 1) (the poison's key first under poisoned_index 0), of v [B,H,Tk,dv] e_1, e_2 and
// (1, 1). Key 2 is hidden from some rows by the first mask the kernel takes: the allow mask from
// query 1 of each batch, lower-right causal from query 0, or key lengths (3, 2) from batch 1; with
// none, or under --masked-inputs finite, every row sees it. A kernel that takes only square or
// causal calls, or upper-left causal alone, gets Tq 3 and its causal mode, which hides key 2 from
// queries 0 and 1.
Case<float> poisoned_key(const Checker& check, Format format, float poison) {
  const Domain domain = check.domain();
  Case<float> c;
  const Causal fallback = domain.causal_alignment();
  c.shape = {2, 1, domain.square() || !domain.causal_optional() || fallback == Causal::upper_left ? 3 : 2, 3, 2, 2};
  c.format = format;
  check.follow_policies(c);  // no row is empty, but the case says the policies checked
  c.mix = "a poisoned key";
  const float q[2][3][2] = {{{1, 1}, {1, 2}, {2, 1}}, {{2, 1}, {1, 1}, {1, 2}}};
  for (int64_t b = 0; b < c.shape.B; ++b) {
    for (int64_t i = 0; i < c.shape.Tq; ++i) c.q.insert(c.q.end(), q[b][i], q[b][i] + 2);
    c.k.insert(c.k.end(), {1, 0, 0, 1, poison, 1});
    if (poisoned_index(check) == 0) std::swap_ranges(c.k.end() - 6, c.k.end() - 4, c.k.end() - 2);
    c.v.insert(c.v.end(), {1, 0, 0, 1, 1, 1});
  }
  c.causal = open_causal(domain);
  if (check.policies().masked_inputs == MaskedInputs::finite || c.causal != Causal::none) return c;
  if (check.claims(ATTNCHECK_CAP_ALLOW)) {
    c.allow.assign(size_t(c.shape.allow_size()), 1);
    for (int64_t b = 0; b < c.shape.B; ++b) c.allow[size_t(c.shape.allow_at(b, 1) + 2)] = 0;
  } else if (check.claims(ATTNCHECK_CAP_CAUSAL)) {
    c.causal = fallback;
  } else if (check.claims(ATTNCHECK_CAP_KV_LENS)) {
    c.key_lengths = {3, 2};
  }
  return c;
}

}  // namespace

// Last of round 0, after every generated property's first case: its fixed case also shows a wrong
// scale, a poor exp or rounded weights, but a fixed case is not shrunk, and a drawn one that shows
// the same bug shrinks to a few elements. Round 0 takes a fraction of a second, so the poison is
// still found on every run within it.
ATTNCHECK_PROPERTY(ANanOrInfPermittedScoreMakesItsRowNaN, .order = 178, .catches = "nan_row_zeroed", .generated = false,
                   .leaves = ATTNCHECK_ONLY_WITHIN_LIMITS) {
  const int64_t poisoned = poisoned_index(check);
  const std::string key = std::to_string(poisoned);
  for (const Format format : {Format::f32, Format::f16, Format::bf16}) {
    if (!check.claims(capability_of(format))) continue;
    std::vector<float> clean_lse;
    const std::vector<float> clean = check.run_with_lse(poisoned_key(check, format, 0), clean_lse);
    for (const float poison : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      const Case<float> c = poisoned_key(check, format, poison);
      const Shape& s = c.shape;
      std::vector<float> lse;
      const std::vector<float> out = check.run_with_lse(c, lse);
      const std::string name = std::isnan(poison) ? "NaN" : "+inf";
      // The rows that may not see the key keep their bits, unless the kernel's answers vary between
      // identical calls (then the oracle alone judges them, below).
      std::vector<size_t> unseen;
      for (int64_t b = 0; b < s.B; ++b)
        for (int64_t i = 0; i < s.Tq; ++i)
          for (int64_t h = 0; h < s.H && !c.permits(b, i, poisoned); ++h)
            for (int64_t col = 0; col < s.dv; ++col) unseen.push_back(size_t(s.out_at(b, h, i) + col));
      std::vector<float> unused;
      const bool varies = !keeps_bits(clean, out, unseen) &&
                          answers_vary([&] { return check.run_with_lse(poisoned_key(check, format, 0), unused); }, clean,
                                       [&] { return check.run_with_lse(c, unused); }, out, unseen);
      // out and clean [B,H,Tq,dv], lse and clean_lse [B,H,Tq] (empty without lse). Element `at` of a row
      // that sees key 2 must be NaN; of one that does not, what it was with 0 in place of the poison
      // (its bits, or any NaN for a NaN).
      auto require = [&](bool seen, const std::string& row, float x, float before, const std::string& at) {
        const std::string got = "got " + show(x) + " at " + at;
        ATTNCHECK_REQUIRE(check, seen ? std::isnan(x) : varies || unchanged(before, x),
                          (seen ? "expected NaN: permitted key " + key + " of row [" + row + "] has a " + name + " score; " + got
                                : "row [" + row + "] may not see key " + key + ", which has a " + name + " score, yet " + got +
                                      "; expected " + show(before) + ", its value with 0 in place of the " + name) +
                              "\n" + describe(c));
      };
      for (int64_t b = 0; b < s.B; ++b)
        for (int64_t h = 0; h < s.H; ++h)
          for (int64_t i = 0; i < s.Tq; ++i) {
            const bool seen = c.permits(b, i, poisoned);
            const std::string row = std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i);
            for (int64_t col = 0; col < s.dv; ++col) {
              const size_t at = size_t(s.out_at(b, h, i) + col);
              require(seen, row, out[at], clean[at], "out[" + row + "," + std::to_string(col) + "]");
            }
            if (!lse.empty())
              require(seen, row, lse[size_t(s.lse_at(b, h, i))], clean_lse[size_t(s.lse_at(b, h, i))], "lse[" + row + "]");
          }
      // The rows that may not see key 2 are now those of the clean case: a finding here is not the poison's.
      require_agreement(check, c, out, reference(c.problem()),
                        "the rows that may not see key " + key + ", as wrong with 0 in place of the " + name, lse_if_any(lse));
    }
  }
}

}  // namespace attncheck::properties
