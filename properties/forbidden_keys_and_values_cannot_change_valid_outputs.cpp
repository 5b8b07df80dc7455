// Claim: changing the keys or values a query may not see, even to inf, NaN or 1e30, leaves that
// query's output unchanged (any NaN stays a NaN, everything else keeps its bits): a forbidden key
// is never read into a valid output. A kernel that multiplies padded values by a zero weight fails
// here (0 * NaN is NaN), and so does one that adds a -inf mask to a NaN or overflowing score
// (NaN + -inf, +inf + -inf). A row that breaks the contract before anything is poisoned is reported
// as that, not as a leak. A kernel whose identical calls differ (two algorithms, a race) cannot be
// held to bits: a changed row is judged by the bound, then each call is repeated to tell a leak
// from answers that vary between identical calls (issue 36).

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(ForbiddenKeysAndValuesCannotChangeValidOutputs, .order = 30, .catches = "multiply_forbidden_values") {
  const Case<float> c = check.draw<float>();
  const Shape& s = c.shape;
  // A query with keys on both sides of its mask: one that can show a leak.
  std::vector<std::pair<int64_t, int64_t>> rows;  // (b, i)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < s.Tq; ++i) {
      int64_t permitted = 0;
      for (int64_t j = 0; j < s.Tk; ++j) permitted += c.permits(b, i, j);
      if (permitted > 0 && permitted < s.Tk) rows.emplace_back(b, i);
    }
  check.classify(!rows.empty(), "a query with forbidden keys");
  if (rows.empty()) return;  // nothing to poison
  const auto [b, i] = rows[size_t(check.in_range(0, int64_t(rows.size())))];
  const char* const targets[] = {"the values of keys it may not see", "keys it may not see",
                                 "keys it may not see and their values"};
  const int64_t target = check.in_range(0, 3);
  const std::vector<float> poisons = forbidden_poisons(check, c.format);
  Case<float> poisoned = c;
  std::string which;  // "key 3: nan, key 5: 1e+30"
  for (int64_t j = 0; j < s.Tk; ++j) {
    if (c.permits(b, i, j)) continue;
    const float poison = poisons[size_t(check.in_range(0, int64_t(poisons.size())))];
    which += (which.empty() ? "key " : ", key ") + std::to_string(j) + ": " + show(poison);
    for (int64_t h = 0; h < s.H; ++h) {
      if (target != 0) std::fill_n(poisoned.k.begin() + s.k_at(b, h, j), s.dk, poison);
      if (target != 1) std::fill_n(poisoned.v.begin() + s.v_at(b, h, j), s.dv, poison);
    }
  }

  const std::vector<float> clean = check.run(c), dirty = check.run(poisoned);
  // Row i of every head within the bound first, through the one comparator (only those rows: the
  // reference computes no other, and the comparator skips what it did not compute): a row wrong
  // before anything is poisoned is reported as that, with its error/bound, not as a leak.
  std::vector<uint8_t> row_i(size_t(s.lse_size()), 0);
  for (int64_t h = 0; h < s.H; ++h) row_i[size_t(s.lse_at(b, h, i))] = 1;
  Comparison before = compare(clean.data(), reference(c.problem(), &row_i).out);
  before.rows = before.exact_rows;  // the rows of this claim: no other was computed, and none screened
  check.observe(before);
  ATTNCHECK_REQUIRE(
      check, before.ok(),
      "row [" + std::to_string(b) + ",*," + std::to_string(i) +
          "] breaks the contract before anything is poisoned: wrong: " + before.report(Arithmetic::of(c.format).label) +
          describe_failure(c, b, before.mismatches.empty() ? 0 : before.mismatches.front().at[1], i));
  // The elements of row i the claim covers, and the first of them that changed (any NaN equals any
  // NaN); none: no leak.
  std::vector<size_t> claimed;
  std::vector<uint8_t> claimed_rows(size_t(s.lse_size()), 0);  // for the comparator, as row_i
  for (int64_t h = 0; h < s.H; ++h) {
    // A row that is empty (its permitted keys all score -inf) under --empty-rows mean averages the
    // forbidden keys' values too, and under any may give anything: its policy, not a leak.
    const bool by_policy = c.empty_rows == EmptyRows::mean || c.empty_rows == EmptyRows::any;
    if (by_policy) {  // and a row outside the checkable range: the kernel's arithmetic may find it empty
      const ExactRow row = exact_row(c.problem(), b, h, i);
      if (row.empty || !std::isfinite(row.bound.empty() ? row.lse_bound : row.bound[0])) continue;
    }
    for (int64_t col = 0; col < s.dv; ++col) claimed.push_back(size_t(s.out_at(b, h, i) + col));
    claimed_rows[size_t(s.lse_at(b, h, i))] = 1;
  }
  if (keeps_bits(clean, dirty, claimed)) return;
  const size_t at = *std::find_if(claimed.begin(), claimed.end(), [&](size_t n) { return !unchanged(clean[n], dirty[n]); });
  const int64_t h = (int64_t(at) / s.dv / s.Tq) % s.H, col = int64_t(at) % s.dv;
  const std::string element =
      "out[" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) + "," + std::to_string(col) + "]";
  const std::string row = "row [" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) + "]";
  const std::string poisoned_what = std::string("when only ") + targets[target] + " were poisoned (" + which + ")";
  // Judged by the bound first: a poisoned call that is wrong is a leak whatever its bits.
  Comparison after = compare(dirty.data(), reference(c.problem(), &claimed_rows).out);
  after.rows = after.exact_rows;
  check.observe(after);
  const std::string moved =
      row + " changed " + poisoned_what + ": " + element + " " + show(clean[at]) + " became " + show(dirty[at]);
  ATTNCHECK_REQUIRE(check, after.ok(),
                    moved + ", wrong: " + after.report(Arithmetic::of(c.format).label) + describe_failure(poisoned, b, h, i));
  // Within the bound, yet not the clean call's bits: a leak, or a kernel whose answers vary.
  const std::optional<std::string> varies =
      answers_vary([&] { return check.run(c); }, clean, [&] { return check.run(poisoned); }, dirty, claimed);
  ATTNCHECK_REQUIRE(check, varies.has_value(),
                    moved + " (each call gives its answer again, 30 times)\n" + describe_failure(poisoned, b, h, i));
}

}  // namespace attncheck::properties
