// Claim: with a sink per head, the output and the log-sum-exp agree with the oracle's within the
// bound: each row's denominator gains exp(sink_h - m) and no value, unscaled, and the lse includes
// it (a row with no permitted key gives 0 and the sink as its lse).
#include "attncheck/agrees_with_oracle_support.hpp"
#include "attncheck/sinks_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(SinksAgreeWithOracle, .order = 220, .catches = "sink_ignored", .needs = ATTNCHECK_CAP_SINKS) {
  const Case<float> c = with_sinks(check, check.draw<float>());
  std::vector<float> lse;
  const std::vector<float> out = check.run_with_lse(c, lse);
  require_agreement(check, c, out, reference(c.problem()), "agrees with the oracle, with sinks", lse_if_any(lse));
}

}  // namespace attncheck::properties
