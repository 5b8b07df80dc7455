// Claim: with sinks, one query called alone gets the row it gets among a batch of queries (mlx 3452:
// a one-query kernel and a many-query one differ with sinks): the last query of a case, alone with
// its row of the allow mask and the bias, the same key lengths, window and causal diagonal (lower-right
// and KV-end put the last query's where a lone query's is), within both calls' bounds.
#include <algorithm>

#include "attncheck/sinks_support.hpp"

namespace attncheck::properties {

namespace {

// The last query of c alone: Tq 1, each (b, h)'s last query row, allow [B,1,Tk] and bias [B,H,1,Tk]
// their last rows; keys, values, sinks and the rest as they are.
Case<float> last_query_of(const Case<float>& c) {
  Case<float> one = c;
  const Shape& s = c.shape;
  one.shape.Tq = 1;
  const Shape& t = one.shape;
  one.q.resize(size_t(t.q_size()));
  if (!c.allow.empty()) one.allow.resize(size_t(t.allow_size()));
  if (!c.bias.empty()) one.bias.resize(size_t(t.scores_size()));
  for (int64_t b = 0; b < s.B; ++b) {
    if (!c.allow.empty()) std::copy_n(c.allow.begin() + s.allow_at(b, s.Tq - 1), s.Tk, one.allow.begin() + t.allow_at(b, 0));
    for (int64_t h = 0; h < s.H; ++h) {
      std::copy_n(c.q.begin() + s.q_at(b, h, s.Tq - 1), s.dk, one.q.begin() + t.q_at(b, h, 0));
      if (!c.bias.empty())
        std::copy_n(c.bias.begin() + s.scores_at(b, h, s.Tq - 1), s.Tk, one.bias.begin() + t.scores_at(b, h, 0));
    }
  }
  return one;
}

}  // namespace

ATTNCHECK_PROPERTY(OneQueryEqualsItsRowWithSinks, .order = 223, .catches = "sink_ignored_in_decode",
                   .needs = ATTNCHECK_CAP_SINKS) {
  const Domain domain = check.domain();
  if (domain.square()) return;  // no lone query is inside the kernel's domain
  Case<float> batch = with_sinks(check, check.draw<float>({.small_only = true}));
  if (batch.causal == Causal::upper_left) {  // its last query's diagonal is not a lone query's
    if (!domain.takes(Causal::lower_right)) return;
    batch.causal = Causal::lower_right;
  }
  const Case<float> one = last_query_of(batch);
  const std::vector<float> out_batch = check.run(batch), out_one = check.run(one);
  const Reference ref_batch = reference(batch.problem()), ref_one = reference(one.problem());
  const Shape &s = batch.shape, &t = one.shape;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      require_rows_agree(check, out_one, ref_one, size_t(t.out_at(b, h, 0)), out_batch, ref_batch,
                         size_t(s.out_at(b, h, s.Tq - 1)), s.dv, [&](int64_t col, double x, double y, double allowed) {
                           return "the last query alone: out[" + std::to_string(b) + "," + std::to_string(h) + ",0," +
                                  std::to_string(col) + "] = " + show(x) + ", but among the batch's " + std::to_string(s.Tq) +
                                  " queries its row gives " + show(y) + " (allowed " + show(allowed) + ")\n" + describe(batch);
                         });
}

}  // namespace attncheck::properties
