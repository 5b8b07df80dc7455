// Claim: with dropout, the output is exactly (P ⊙ keep / (1 - p)) V for the keep mask the kernel
// says it used, P the softmax over every permitted key; each byte of that mask is 0 or 1 (a
// forbidden key's bit is immaterial, but written: docs/protocol.md); and the log-sum-exp, asked in a second call of the same
// seed, is that of the weights before dropout, that call's output the same.

#include "attncheck/dropout_support.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(DropoutAgreesWithOracleForItsMask, .order = 210, .catches = "dropout_rescaled_by_keep",
                   .needs = ATTNCHECK_CAP_DROPOUT | ATTNCHECK_CAP_DROPOUT_MASK) {
  const double p = draw_dropout_rate(check);
  const Case<float> c = with_dropout(check, check.draw<float>(), p);
  std::vector<uint8_t> keep;
  const std::vector<float> out = check.run(c, keep);
  const Shape& s = c.shape;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i)
        for (int64_t j = 0; j < s.Tk; ++j) {
          const uint8_t k = keep[size_t(s.scores_at(b, h, i) + j)];
          ATTNCHECK_REQUIRE(check, k <= 1,
                            "keep mask [" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) + "," +
                                std::to_string(j) + "] of a " + (c.permits(b, i, j) ? "permitted" : "forbidden") + " key is " +
                                std::to_string(int(k)) + (k == 0xFF ? " (never written)" : "") + ", not 0 or 1\n" + describe(c));
        }
  const std::string claim = "dropout at p = " + show(p) + " with the kernel's keep mask";
  const Reference ref = reference(with_keep(c, keep));
  require_agreement<float>(check, c, out, ref, claim, nullptr, &keep);
  if (!check.has_lse()) return;
  std::vector<float> lse;
  const std::vector<float> again = check.run(c, lse);
  require_agreement(check, c, again, ref, claim + ", asked for its log-sum-exp as well (the weights' before dropout)", &lse,
                    &keep);
}

}  // namespace attncheck::properties
