// Claim: the heads are interchangeable: permuting them (the KV heads with their query groups: the
// columns of w_q, b_q, w_k, b_k, w_v, b_v and the rows of w_o together) leaves out unchanged, within
// the bounds of both layers.

#include <numeric>

#include "attncheck/layer_support.hpp"

namespace attncheck::properties {

namespace {

// The blocks of `width` columns of x [rows, n width] reordered: block g of the result is block
// order[g] of x.
std::vector<float> permuted_columns(const std::vector<float>& x, int64_t rows, int64_t n, int64_t width,
                                    const std::vector<int64_t>& order) {
  if (x.empty()) return x;
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < n; ++g)
      for (int64_t c = 0; c < width; ++c) y[size_t((r * n + g) * width + c)] = x[size_t((r * n + order[size_t(g)]) * width + c)];
  return y;
}

}  // namespace

ATTNCHECK_PROPERTY(LayerHeadPermutationInvariant, .order = 330, .catches = "heads_merged_untransposed", .layer = true) {
  const LayerCase<float> c = draw_layer<float>(check, {.min_heads = 2});
  const LayerShape& s = c.shape;
  const Shape& h = s.heads;
  const int64_t G = h.H / h.kv_heads();
  std::vector<int64_t> kv_order(size_t(h.kv_heads()));
  std::iota(kv_order.begin(), kv_order.end(), 0);
  for (size_t at = kv_order.size(); at > 1; --at) std::swap(kv_order[at - 1], kv_order[check.below(at)]);
  std::vector<int64_t> q_order;  // query head g G + r follows its KV head g
  for (int64_t g : kv_order)
    for (int64_t r = 0; r < G; ++r) q_order.push_back(g * G + r);
  if (h.kv_heads() == 1)  // one KV head: permute the query heads among themselves
    for (size_t at = q_order.size(); at > 1; --at) std::swap(q_order[at - 1], q_order[check.below(at)]);

  LayerCase<float> p = c;
  p.w_q = permuted_columns(c.w_q, s.D, h.H, h.dk, q_order);
  p.b_q = permuted_columns(c.b_q, 1, h.H, h.dk, q_order);
  p.w_k = permuted_columns(c.w_k, s.D, h.kv_heads(), h.dk, kv_order);
  p.b_k = permuted_columns(c.b_k, 1, h.kv_heads(), h.dk, kv_order);
  p.w_v = permuted_columns(c.w_v, s.D, h.kv_heads(), h.dv, kv_order);
  p.b_v = permuted_columns(c.b_v, 1, h.kv_heads(), h.dv, kv_order);
  p.w_o = permuted_columns(c.w_o, 1, h.H, h.dv * s.D, q_order);  // rows h dv .. of w_o, each block dv rows of D
  const std::vector<float> before = check.run_layer(c), after = check.run_layer(p);
  require_close(check, p, before, after, layer_reference(c.layer()).out, layer_reference(p.layer()).out, "the heads permuted");
}

}  // namespace attncheck::properties
