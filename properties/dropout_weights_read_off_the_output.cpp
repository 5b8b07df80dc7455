// Claim: with dropout, every weight is 0 or p_ij / (1 - p), p_ij the softmax over every permitted
// key (not over the survivors), a forbidden key's weight is 0, and out is the dropped weights times
// V (not the output dropped). Read off the output alone, so it checks a kernel that cannot say
// which weights it kept: V = [I | 1] makes out the row of dropped weights and then their sum; the
// mask it shows is then judged as the kernel's own.

#include "attncheck/dropout_support.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(DropoutWeightsReadOffTheOutput, .order = 215, .catches = "dropout_before_softmax",
                   .needs = ATTNCHECK_CAP_DROPOUT, .leaves = ATTNCHECK_ONLY_EQUAL_HEAD_DIMS | ATTNCHECK_ONLY_WITHIN_LIMITS) {
  const double p = draw_dropout_rate(check);
  // V = [I | 1] makes dv = Tk + 1: a large case would cost Tk times a pass over it.
  const Case<float> c = with_weight_values(with_dropout(check, check.draw<float>({.small_only = true}), p));
  const std::vector<float> out = check.run(c);
  const Reference weights = undropped_weights(c);
  const std::vector<uint8_t> keep = keep_read_off(c, out, weights);
  require_agreement<float>(check, c, out, read_off_reference(c, keep, weights, out),
                           "dropout at p = " + show(p) + ", V = [I | 1]: each weight 0 or p_ij / (1 - p), their sum last",
                           nullptr, &keep);
}

}  // namespace attncheck::properties
