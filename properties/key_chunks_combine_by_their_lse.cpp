// Claim: split-KV (flash-decoding) combines: the keys split into two chunks, each called alone for
// out_c and lse_c, give the whole's exact output as sum_c exp(lse_c - L) out_c with
// L = log(sum_c exp(lse_c) + exp(sink)), within what the chunks' own bounds allow (below). The sink,
// when the case has one, is the whole's and joins only L: the chunks are called without it.
#include <algorithm>
#include <cmath>

#include "attncheck/sinks_support.hpp"

namespace attncheck::properties {

namespace {

// Keys [from, to) of c: k [B,H_kv,to-from,dk], v [..,dv], allow [B,Tq,to-from], bias [B,H,Tq,to-from],
// key lengths counted from `from`; no sinks (the whole's, combined outside).
Case<float> keys_of(const Case<float>& c, int64_t from, int64_t to) {
  Case<float> part = c;
  part.sinks.clear();
  part.shape.Tk = to - from;
  const Shape &s = part.shape, &w = c.shape;
  part.k.resize(size_t(s.k_size()));
  part.v.resize(size_t(s.v_size()));
  part.allow.resize(size_t(c.allow.empty() ? 0 : s.allow_size()));
  part.bias.resize(size_t(c.bias.empty() ? 0 : s.scores_size()));
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.H; h += s.H / s.kv_heads()) {  // the first query head of each KV head
      std::copy_n(c.k.begin() + w.k_at(b, h, from), s.Tk * s.dk, part.k.begin() + s.k_at(b, h, 0));
      std::copy_n(c.v.begin() + w.v_at(b, h, from), s.Tk * s.dv, part.v.begin() + s.v_at(b, h, 0));
    }
    for (int64_t i = 0; i < s.Tq; ++i) {
      if (!c.allow.empty()) std::copy_n(c.allow.begin() + w.allow_at(b, i) + from, s.Tk, part.allow.begin() + s.allow_at(b, i));
      for (int64_t h = 0; h < s.H && !c.bias.empty(); ++h)
        std::copy_n(c.bias.begin() + w.scores_at(b, h, i) + from, s.Tk, part.bias.begin() + s.scores_at(b, h, i));
    }
    if (!c.key_lengths.empty())
      part.key_lengths[size_t(b)] = int32_t(std::clamp<int64_t>(c.key_lengths[size_t(b)] - from, 0, s.Tk));
  }
  return part;
}

// c with its causal mode and window folded into its allow mask, so that a chunk of its keys keeps
// them (a causal diagonal and a window move with Tk).
Case<float> positions_as_allow(Case<float> c) {
  const Shape& s = c.shape;
  std::vector<uint8_t> allow(size_t(s.allow_size()));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < s.Tq; ++i)
      for (int64_t j = 0; j < s.Tk; ++j) allow[size_t(s.allow_at(b, i) + j)] = c.permits(b, i, j);
  c.allow = std::move(allow);
  c.causal = Causal::none;
  c.window_left = c.window_right = -1;
  return c;
}

// One chunk's call: its out [B,H,Tq,dv] and lse [B,H,Tq], and the oracle's bounds on them.
struct Chunk {
  std::vector<float> out, lse;
  Reference reference;
};

// What the oracle's own out of column `col` of row (b, h, .) may err by, which its bound charges and
// the combination's does not (docs/error-bound.md, "Split keys"): its double-double sums, within
// 2^-90 of the largest |v_jc|, and the terms its exp drops below 2^-1074 of l, 2^-1070 sum_j |v_jc|.
double oracle_error(const Case<float>& c, int64_t b, int64_t h, int64_t col) {
  double largest = 0, sum = 0;
  for (int64_t j = 0; j < c.shape.Tk; ++j) {
    const double v = std::fabs(double(c.v[size_t(c.shape.v_at(b, h, j) + col)]));
    largest = std::isfinite(v) ? std::max(largest, v) : largest;
    sum += std::isfinite(v) ? v : 0;
  }
  return largest * 0x1p-90 + sum * 0x1p-1070;
}

// The whole's exact out [B,H,Tq,dv], each element's bound replaced by what the chunks allow the
// combination: with |lse_c - exact| <= b_c, L is off by at most b = max b_c and each weight
// w_c = exp(lse_c - L) by a factor within exp(+-2b), so |sum_c w_c out_c - exact| <=
// sum_c w_c (B_c + (|out_c| + B_c) (e^(2b) - 1)), B_c out_c's bound (docs/error-bound.md, "Split keys").
// The combination itself, in long double, into `combined`.
ExactTensor combine(const Case<float>& c, const Chunk (&chunks)[2], const Reference& whole, std::vector<double>& combined) {
  const Shape& s = c.shape;
  const Problem<float> problem = c.problem();
  ExactTensor expected = whole.out;
  combined.assign(size_t(s.out_size()), 0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        const auto at = size_t(s.lse_at(b, h, i));
        // L: the log of the sum of the chunks' exp(lse_c) and the sink's, taken about their largest;
        // b: the largest lse bound among the chunks that take weight. A NaN lse makes the row NaN.
        long double m = has_sink(problem, h) ? c.sinks[size_t(h)] : -INFINITY, sum = 0;
        double spread = 0;
        for (const Chunk& chunk : chunks) m = std::isnan(chunk.lse[at]) ? NAN : std::max(m, (long double)chunk.lse[at]);
        for (const Chunk& chunk : chunks)
          if (chunk.lse[at] > -INFINITY) {
            sum += expl(chunk.lse[at] - m);
            spread = std::max(spread, chunk.reference.lse.bound[at]);
          }
        if (has_sink(problem, h)) sum += expl(c.sinks[size_t(h)] - m);
        const long double L = m + logl(sum);
        for (int64_t col = 0; col < s.dv; ++col) {
          const auto e = size_t(s.out_at(b, h, i) + col);
          long double value = std::isnan(L) ? NAN : 0, allowed = 0, size = 0;
          for (const Chunk& chunk : chunks) {
            if (chunk.lse[at] == -INFINITY) continue;  // an empty chunk row weighs nothing
            const long double weight = expl(chunk.lse[at] - L), o = chunk.out[e], B = chunk.reference.out.bound[e];
            value += weight * o;        // a NaN or inf out_c stays so even where its weight underflows, as in the oracle
            if (weight == 0) continue;  // below 2^-16445 of the whole: nothing a double holds
            size += weight * fabsl(o);
            allowed += weight * (B + (fabsl(o) + B) * expm1l(2 * (long double)spread));
          }
          combined[e] = double(value);
          // Unchecked (an infinite bound) where the whole's is: a score or a sum that overflows float.
          // Else the chunks' allowance, the sums' rounding and the oracle's own error in the whole.
          if (std::isfinite(expected.bound[e]))
            expected.bound[e] =
                double(allowed + size * 0x1p-50L + fabsl(value) * 0x1p-52L + 0x1p-1074L) + oracle_error(c, b, h, col);
        }
      }
  return expected;
}

}  // namespace

ATTNCHECK_PROPERTY(KeyChunksCombineByTheirLse, .order = 240, .catches = "lse_max_left_out", .needs = ATTNCHECK_CAP_LSE) {
  const Domain domain = check.domain();
  Case<float> c = check.draw<float>({.small_only = true});
  if (check.claims(ATTNCHECK_CAP_SINKS) && check.coin()) c = with_sinks(check, c);
  const bool positional = c.causal != Causal::none || c.window_left >= 0 || c.window_right >= 0;
  // A chunk's Tk is not Tq, and a chunk whose rows are empty follows the empty-row policy, not the
  // combination's zero weight: no split within such a kernel's domain or policies.
  if (c.shape.Tk < 2 || domain.square() || c.empty_rows != EmptyRows::zero || c.lse_empty != LseEmpty::ninf ||
      (positional && !(check.claims(ATTNCHECK_CAP_ALLOW) && domain.causal_optional())))
    return check.classify(true, "not split");
  if (positional) c = positions_as_allow(c);
  const int64_t split = check.in_range(1, c.shape.Tk);
  const Case<float> parts[2] = {keys_of(c, 0, split), keys_of(c, split, c.shape.Tk)};
  Chunk chunks[2];
  for (int p = 0; p < 2; ++p) {
    chunks[p].out = check.run(parts[p], chunks[p].lse);
    chunks[p].reference = reference(parts[p].problem());
  }
  std::vector<double> combined;
  const ExactTensor expected = combine(c, chunks, reference(c.problem()), combined);
  const Comparison comparison = compare(combined.data(), expected);  // not observed: its bound is not the oracle's
  ATTNCHECK_REQUIRE(
      check, comparison.ok(),
      "keys 0.." + std::to_string(split - 1) + " and " + std::to_string(split) + ".." + std::to_string(c.shape.Tk - 1) +
          " called apart and combined by their lse: " + comparison.report(Arithmetic::of(c.format).label) +
          "\nthe whole: " + describe(c) + "\nthe first chunk: " + describe(parts[0]) + "\nthe second: " + describe(parts[1]));
}

}  // namespace attncheck::properties
