// Claim: with a causal mask, dropping the last queries (and, lower-right, as many last keys)
// leaves the remaining queries' outputs unchanged: nothing past a query's limit reaches it.

#include <algorithm>

#include "attncheck/property.hpp"
#include "attncheck/rows.hpp"

namespace attncheck::properties {

// The first Tq' queries and first Tk' keys of every (b, h) of c.
template <class T>
Case<T> truncate(const Case<T>& c, int64_t Tq, int64_t Tk) {
  const Shape& s = c.shape;
  Case<T> t = c;
  t.shape.Tq = Tq;
  t.shape.Tk = Tk;
  // The first `kept` of `all` rows of `width` in each of the B * heads matrices of x.
  auto rows = [&](const std::vector<T>& x, int64_t all, int64_t kept, int64_t width, int64_t heads) {
    std::vector<T> y;
    for (int64_t m = 0; m < s.B * heads; ++m)
      y.insert(y.end(), x.begin() + m * all * width, x.begin() + (m * all + kept) * width);
    return y;
  };
  t.q = rows(c.q, s.Tq, Tq, s.dk, s.H);
  t.k = rows(c.k, s.Tk, Tk, s.dk, s.kv_heads());
  t.v = rows(c.v, s.Tk, Tk, s.dv, s.kv_heads());
  // allow [B,Tq,Tk] and bias [B,H,Tq,Tk]: the kept corner of each matrix.
  auto corner = [&](const auto& x, int64_t matrices) {
    std::decay_t<decltype(x)> y;
    for (int64_t m = 0; m < matrices && !x.empty(); ++m)
      for (int64_t i = 0; i < Tq; ++i)
        y.insert(y.end(), x.begin() + (m * s.Tq + i) * s.Tk, x.begin() + (m * s.Tq + i) * s.Tk + Tk);
    return y;
  };
  t.allow = corner(c.allow, s.B);
  t.bias = corner(c.bias, s.B * s.H);
  for (int32_t& length : t.key_lengths) length = std::min<int32_t>(length, int32_t(Tk));
  return t;
}

ATTNCHECK_PROPERTY(CausalPrefixIgnoresTheFuture, .order = 110, .catches = "causal_swapped", .needs = ATTNCHECK_CAP_CAUSAL) {
  Case<float> c = check.draw<float>({.min_len = 2});
  c.causal = check.coin() ? Causal::upper_left : Causal::lower_right;
  if (!check.domain().takes(c.causal)) c.causal = c.causal == Causal::upper_left ? Causal::lower_right : Causal::upper_left;
  // A window is centred on the lower-right diagonal: dropping as many queries as keys keeps it, but
  // the upper-left truncation moves it.
  if (c.causal == Causal::upper_left) c.window_left = c.window_right = -1;
  const Shape& s = c.shape;
  // Lower-right keeps Tk - dropped >= 1 keys: drop fewer than Tk.
  const int64_t most = c.causal == Causal::upper_left ? s.Tq - 1 : std::min(s.Tq, s.Tk) - 1;
  // A kept case (a shrinking trial's) may be smaller than min_len: with nothing to drop, no claim.
  if (most < 1) return;
  const int64_t dropped = 1 + check.in_range(0, most);
  const int64_t Tq = s.Tq - dropped;
  const int64_t Tk = c.causal == Causal::upper_left ? std::min(s.Tk, Tq) : s.Tk - dropped;
  check.classify(c.causal == Causal::upper_left, "upper-left");
  const Case<float> t = truncate(c, Tq, Tk);

  // The truncated problem's bound, the full problem's exact values of the kept rows (the same rows
  // of a large case's sample: row (b, h, i) of t is row (b, h, i) of c).
  Reference expected = reference(t.problem());
  const std::vector<uint8_t> kept = rows_computed(expected.out);
  std::vector<uint8_t> wanted(size_t(s.lse_size()), 0);
  for (int64_t m = 0; m < s.B * s.H; ++m) std::copy_n(kept.begin() + m * Tq, Tq, wanted.begin() + m * s.Tq);
  // Under --empty-rows mean a row with no permitted key averages every key, the future's too, by its
  // policy: each problem's own exact values then (the kept rows with a permitted key agree anyway).
  const Reference full = reference(c.problem(), &wanted);
  for (int64_t b = 0; b < s.B && c.empty_rows != EmptyRows::mean; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      std::copy_n(full.out.exact.begin() + s.out_at(b, h, 0), Tq * s.dv, expected.out.exact.begin() + t.shape.out_at(b, h, 0));
  require_agreement(check, t, check.run(t), expected, "the first " + std::to_string(Tq) + " queries alone");
}

}  // namespace attncheck::properties
