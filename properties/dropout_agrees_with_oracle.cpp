// Claim: with dropout, the output is exactly (P ⊙ keep / (1 - p)) V for the keep mask the kernel
// says it used, P the softmax over every permitted key; each byte of that mask is 0 or 1; and the
// log-sum-exp is that of the weights before dropout.

#include "attncheck/dropout_support.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(DropoutAgreesWithOracleForItsMask, .order = 210, .catches = "dropout_rescaled_by_keep",
                   .needs = ATTNCHECK_CAP_DROPOUT | ATTNCHECK_CAP_DROPOUT_MASK) {
  const double p = draw_dropout_rate(check);
  const Case<float> c = with_dropout(check, check.draw<float>(), p);
  std::vector<uint8_t> keep;
  const std::vector<float> out = check.run(c, keep);
  for (size_t at = 0; at < keep.size(); ++at)
    ATTNCHECK_REQUIRE(check, keep[at] <= 1,
                      "keep mask element " + std::to_string(at) + " of [B,H,Tq,Tk] is " + std::to_string(int(keep[at])) +
                          (keep[at] == 0xFF ? " (never written)" : "") + ", not 0 or 1\n" + describe(c));
  require_agreement<float>(check, c, out, reference(with_keep(c, keep)), "dropout at p = " + show(p) + " with the kernel's keep mask",
                    nullptr, &keep);
}

}  // namespace attncheck::properties
