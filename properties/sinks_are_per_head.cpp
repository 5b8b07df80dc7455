// Claim: sinks are per head: changing head 0's sink leaves every other head's output where it was
// (the kernel against itself, within the oracle's bound of each call), and head 0's agrees with the
// oracle's for the new sink.
#include <limits>

#include "attncheck/agrees_with_oracle_support.hpp"
#include "attncheck/sinks_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(SinksArePerHead, .order = 222, .catches = "one_sink_for_all_heads", .needs = ATTNCHECK_CAP_SINKS) {
  const Case<float> before = with_sinks(check, check.draw<float>({.min_heads = 2, .small_only = true}));
  Case<float> after = before;
  // Head 0's sink moved as far as it goes: to +30, which outweighs every key, or from it to none.
  after.sinks[0] = before.sinks[0] == 30 ? -std::numeric_limits<float>::infinity() : 30;
  const std::vector<float> out_before = check.run(before), out_after = check.run(after);
  const Reference ref_before = reference(before.problem()), ref_after = reference(after.problem());
  require_agreement(check, after, out_after, ref_after, "head 0's sink changed: agrees with the oracle");
  const Shape& s = before.shape;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 1; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i)
        require_rows_agree(check, out_before, ref_before, size_t(s.out_at(b, h, i)), out_after, ref_after,
                           size_t(s.out_at(b, h, i)), s.dv, [&](int64_t col, double x, double y, double allowed) {
                             return "out[" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) + "," +
                                    std::to_string(col) + "] of head " + std::to_string(h) + " moved from " + show(x) + " to " +
                                    show(y) + " (more than its bounds, " + show(allowed) + ") when only head 0's sink changed, " +
                                    show(before.sinks[0]) + " to " + show(after.sinks[0]) + "\n" + describe(before);
                           });
}

}  // namespace attncheck::properties
