// Claim: no packed sequence reads another's rows (no bleeding across cu_seqlens): every other
// sequence's queries, keys and values poisoned (NaN, inf, 1e30, or the finite extremes under
// --masked-inputs finite), one sequence's outputs keep their bits (any NaN equals any NaN). A kernel
// whose identical calls differ is told apart by repeating each call (answers_vary).
#include <algorithm>
#include <optional>

#include "attncheck/varlen_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(NoSequenceReadsAnother, .order = 256, .catches = "varlen_cu_seqlens_off_by_one",
                   .needs = ATTNCHECK_CAP_VARLEN) {
  const Case<float> c = draw_varlen(check);
  const Shape& s = c.shape;
  std::vector<int64_t> with_queries;  // the sequences that have rows to keep
  for (int64_t b = 0; b < s.B; ++b)
    if (sequence(c.problem(), b).Tq > 0) with_queries.push_back(b);
  const int64_t kept = with_queries[size_t(check.in_range(0, int64_t(with_queries.size())))];
  const Sequence q = sequence(c.problem(), kept);
  const std::vector<float> poisons = forbidden_poisons(check, c.format);
  const float poison = poisons[size_t(check.in_range(0, int64_t(poisons.size())))];
  Case<float> poisoned = c;
  for (int64_t h = 0; h < s.H; ++h) {
    for (int64_t r = 0; r < s.Tq; ++r)
      if (r < q.first_q || r >= q.first_q + q.Tq) std::fill_n(poisoned.q.begin() + s.q_at(0, h, r), s.dk, poison);
    for (int64_t j = 0; j < s.Tk; ++j)
      if (j < q.first_k || j >= q.first_k + q.Tk) {
        std::fill_n(poisoned.k.begin() + s.k_at(0, h, j), s.dk, poison);
        std::fill_n(poisoned.v.begin() + s.v_at(0, h, j), s.dv, poison);
      }
  }
  const std::vector<float> first = check.run(c), second = check.run(poisoned);
  // Rows an empty-row policy gives from every key (mean, any) are the policy's, not a leak.
  std::vector<size_t> claimed;
  const Case<float> twin = dense_twin(c);
  const Problem<float> dense = twin.problem();
  for (int64_t h = 0; h < s.H; ++h)
    for (int64_t r = q.first_q; r < q.first_q + q.Tq; ++r) {
      if (c.empty_rows != EmptyRows::zero && exact_row(dense, 0, h, r).empty) continue;
      for (int64_t col = 0; col < s.dv; ++col) claimed.push_back(size_t(s.out_at(0, h, r) + col));
    }
  if (keeps_bits(first, second, claimed)) return;
  const size_t at = *std::find_if(claimed.begin(), claimed.end(), [&](size_t n) { return !unchanged(first[n], second[n]); });
  const std::optional<std::string> varies =
      answers_vary([&] { return check.run(c); }, first, [&] { return check.run(poisoned); }, second, claimed);
  ATTNCHECK_REQUIRE(check, varies.has_value(),
                    "out element " + std::to_string(at) + " of sequence " + std::to_string(kept) + " moved from " +
                        show(first[at]) + " to " + show(second[at]) + " when only the other sequences' q, k and v rows became " +
                        show(poison) + " (each call gives its answer again, 30 times)\n" + describe(c));
}

}  // namespace attncheck::properties
