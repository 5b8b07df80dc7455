// Claim: a paged pool's slots that hold no key of a sequence (past its length, in blocks its table
// names past its last one, in blocks no table names) never reach an output: poisoned with one value
// and then another (NaN, inf, 1e30), every output keeps its bits (any NaN equals any NaN). A kernel
// whose identical calls differ is told apart by repeating each call (answers_vary).
#include <algorithm>
#include <optional>

#include "attncheck/paged_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(PoisonedSlotsNeverReachAnOutput, .order = 252, .catches = "paged_last_block_read_whole",
                   .needs = ATTNCHECK_CAP_PAGED_KV) {
  const PagedCase drawn = draw_paged(check);
  const Case<float>& c = drawn.c;
  const Shape& s = c.shape;
  // The pool's rows some sequence keeps a key in (j below its length), each KV head's.
  std::vector<uint8_t> holds_a_key(size_t(s.kv_rows()), 0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t j = 0; j < (c.key_lengths.empty() ? s.Tk : c.key_lengths[size_t(b)]); ++j)
        holds_a_key[size_t(kv_row(s, c.block_table.data(), b, h, j))] = 1;
  const std::vector<float> poisons = forbidden_poisons(check, c.format);
  const float poison = poisons[size_t(check.in_range(0, int64_t(poisons.size())))];
  Case<float> repoisoned = c;
  for (int64_t row = 0; row < s.kv_rows(); ++row)
    if (!holds_a_key[size_t(row)]) {
      std::fill_n(repoisoned.k.begin() + row * s.dk, s.dk, poison);
      std::fill_n(repoisoned.v.begin() + row * s.dv, s.dv, poison);
    }
  const std::vector<float> first = check.run(c), second = check.run(repoisoned);
  // Rows an empty-row policy gives from every key (mean, any) are the policy's, not a leak.
  std::vector<size_t> claimed;
  const Case<float> twin = dense_twin(c);
  const Problem<float> dense = twin.problem();
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        if (c.empty_rows != EmptyRows::zero && exact_row(dense, b, h, i).empty) continue;
        for (int64_t col = 0; col < s.dv; ++col) claimed.push_back(size_t(s.out_at(b, h, i) + col));
      }
  if (keeps_bits(first, second, claimed)) return;
  const size_t at = *std::find_if(claimed.begin(), claimed.end(), [&](size_t n) { return !unchanged(first[n], second[n]); });
  const std::optional<std::string> varies =
      answers_vary([&] { return check.run(c); }, first, [&] { return check.run(repoisoned); }, second, claimed);
  ATTNCHECK_REQUIRE(check, varies.has_value(),
                    "out element " + std::to_string(at) + " moved from " + show(first[at]) + " to " + show(second[at]) +
                        " when only the pool's slots that hold no key went from " + show(drawn.poison) + " to " + show(poison) +
                        " (each call gives its answer again, 30 times)\n" + describe(c));
}

}  // namespace attncheck::properties
