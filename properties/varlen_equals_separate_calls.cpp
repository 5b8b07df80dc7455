// Claim: sequences packed into one varlen call get what each gets alone: the packed call's output and
// lse agree with the oracle's (its sequences as one mask over the packed rows, each sequence's causal
// diagonal and window at its own lengths), and each sequence's rows equal those of a call on that
// sequence alone, within both calls' bounds. Lengths 0 (a sequence with no query or no key) among them.
#include "attncheck/varlen_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(VarlenEqualsSeparateCalls, .order = 255, .catches = "varlen_causal_at_packed_tensor",
                   .needs = ATTNCHECK_CAP_VARLEN) {
  const Case<float> packed = draw_varlen(check);
  std::vector<float> lse;
  const std::vector<float> out = check.run_with_lse(packed, lse);
  const Reference ref = reference(dense_twin(packed).problem());
  require_agreement(check, packed, out, ref, "packed sequences agree with the oracle's answer for each", lse_if_any(lse));
  const Shape& s = packed.shape;
  for (int64_t b = 0; b < s.B; ++b) {
    const Sequence q = sequence(packed.problem(), b);
    if (q.Tq == 0 || q.Tk == 0) continue;  // no call of its own (the oracle judged its rows above)
    const Case<float> one = sequence_alone(packed, b);
    const std::vector<float> out_one = check.run(one);
    const Reference ref_one = reference(dense_twin(one).problem());
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < q.Tq; ++i)
        require_rows_agree(check, out_one, ref_one, size_t(one.shape.out_at(0, h, i)), out, ref,
                           size_t(s.out_at(0, h, q.first_q + i)), s.dv, [&](int64_t col, double x, double y, double allowed) {
                             return "sequence " + std::to_string(b) + " alone: out[0," + std::to_string(h) + "," +
                                    std::to_string(i) + "," + std::to_string(col) + "] = " + show(x) +
                                    ", but packed among the others its row " + std::to_string(q.first_q + i) + " gives " +
                                    show(y) + " (allowed " + show(allowed) + ")\n" + describe(packed);
                           });
  }
}

}  // namespace attncheck::properties
