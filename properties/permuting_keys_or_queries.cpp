// Claim: permuting keys and values together (with their mask columns) leaves the outputs
// unchanged within the bound; permuting queries (with their mask rows) permutes the outputs.
// Without a causal mask, where position carries no meaning (so not for a kernel that takes only causal calls).

#include <algorithm>
#include <numeric>

#include "attncheck/property.hpp"
#include "attncheck/rows.hpp"

namespace attncheck::properties {

// A permutation of 0..n-1 by Fisher-Yates on the checker's choices, so that it shrinks to identity.
std::vector<int64_t> permutation(Checker& check, int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  for (int64_t k = n - 1; k > 0; --k) std::swap(p[size_t(k)], p[size_t(k - check.in_range(0, k + 1))]);
  return p;
}

ATTNCHECK_PROPERTY(PermutingKeysOrQueries, .order = 120, .catches = "online_no_rescale", .leaves = ATTNCHECK_ONLY_CAUSAL) {
  Case<float> c = check.draw<float>();
  c.causal = Causal::none;
  const Shape& s = c.shape;
  // Key padding and a window become allow entries, so that they travel with their keys and queries;
  // for a kernel that takes no allow mask, they go.
  if (!check.claims(ATTNCHECK_CAP_ALLOW)) {
    c.key_lengths.clear();
    c.window_left = c.window_right = -1;
  } else if (!c.key_lengths.empty() || c.window_left >= 0 || c.window_right >= 0) {
    std::vector<uint8_t> allow(size_t(s.allow_size()));
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t i = 0; i < s.Tq; ++i)
        for (int64_t j = 0; j < s.Tk; ++j) allow[size_t(s.allow_at(b, i) + j)] = c.permits(b, i, j);
    c.allow = allow;
    c.key_lengths.clear();
    c.window_left = c.window_right = -1;
  }
  const bool keys = check.coin();
  check.classify(keys, "keys permuted");
  const std::vector<int64_t> order = permutation(check, keys ? s.Tk : s.Tq);  // new position n holds old order[n]

  // Moves rows of `rows` x `width` blocks within each of `matrices` matrices.
  auto permute_rows = [&](const auto& x, int64_t matrices, int64_t rows, int64_t width) {
    auto y = x;
    for (int64_t m = 0; m < matrices && !x.empty(); ++m)
      for (int64_t n = 0; n < rows; ++n)
        std::copy_n(x.begin() + (m * rows + order[size_t(n)]) * width, width, y.begin() + (m * rows + n) * width);
    return y;
  };
  auto permute_columns = [&](const auto& x, int64_t matrices_rows) {  // [.., Tk] matrices, permuting Tk
    auto y = x;
    for (int64_t r = 0; r < matrices_rows && !x.empty(); ++r)
      for (int64_t n = 0; n < s.Tk; ++n) y[size_t(r * s.Tk + n)] = x[size_t(r * s.Tk + order[size_t(n)])];
    return y;
  };
  Case<float> p = c;
  if (keys) {
    p.k = permute_rows(c.k, s.B * s.kv_heads(), s.Tk, s.dk);
    p.v = permute_rows(c.v, s.B * s.kv_heads(), s.Tk, s.dv);
    p.allow = permute_columns(c.allow, s.B * s.Tq);
    p.bias = permute_columns(c.bias, s.B * s.H * s.Tq);
  } else {
    p.q = permute_rows(c.q, s.B * s.H, s.Tq, s.dk);
    p.allow = permute_rows(c.allow, s.B, s.Tq, s.Tk);
    p.bias = permute_rows(c.bias, s.B * s.H, s.Tq, s.Tk);
  }

  // The permuted problem's bound, against the original's exact values (rows moved with queries),
  // of the same rows in a large case's sample: row n of p is row order[n] of c.
  Reference expected = reference(p.problem());
  const std::vector<uint8_t> computed = rows_computed(expected.out);
  std::vector<uint8_t> wanted = computed;
  if (!keys)
    for (int64_t m = 0; m < s.B * s.H; ++m)
      for (int64_t n = 0; n < s.Tq; ++n) wanted[size_t(m * s.Tq + order[size_t(n)])] = computed[size_t(m * s.Tq + n)];
  const Reference original = reference(c.problem(), &wanted);
  expected.out.exact = keys ? original.out.exact : permute_rows(original.out.exact, s.B * s.H, s.Tq, s.dv);
  require_agreement(check, p, check.run(p), expected, keys ? "keys permuted" : "queries permuted");
}

}  // namespace attncheck::properties
