// Claim: a sink of -inf is no sink: every head's sink -inf gives the answer of the same problem
// without sinks (an empty row 0 by the policy, its lse -inf), within the oracle's bound.
#include "attncheck/agrees_with_oracle_support.hpp"

#include <limits>

namespace attncheck::properties {

ATTNCHECK_PROPERTY(SinkOfMinusInfinityIsNoSink, .order = 221, .catches = "sink_minus_inf_empty_row_nan",
                   .needs = ATTNCHECK_CAP_SINKS) {
  const Case<float> without = check.draw<float>();
  Case<float> c = without;
  c.sinks.assign(size_t(c.shape.H), -std::numeric_limits<float>::infinity());
  std::vector<float> lse;
  const std::vector<float> out = check.run_with_lse(c, lse);
  require_agreement(check, c, out, reference(without.problem()), "sinks of -inf give the answer without sinks", lse_if_any(lse));
}

}  // namespace attncheck::properties
