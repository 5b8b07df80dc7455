// Claim: a key no query may see cannot change the layer's output: its input row of x_kv, through
// w_k and w_v, reaches only its own key and value, and those carry weight 0. Key Tk - 1 of batch 0
// is made padding (its key length, or its column of the allow mask) and its input row replaced by
// large finite values: every output keeps its bits (under --empty-rows mean or any, every output
// of a query with a permitted key). In self-attention that row is query Tk - 1's input too, so its
// own output row may change and is not compared.

#include "attncheck/layer_support.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(LayerForbiddenKeysCannotChangeOutputs, .order = 320, .catches = "padding_mask_polarity_of_mha",
                   .needs_one_of = ATTNCHECK_CAP_KV_LENS | ATTNCHECK_CAP_ALLOW, .layer = true) {
  LayerCase<float> c = draw_layer<float>(check);
  const Shape& h = c.shape.heads;
  const int64_t j = h.Tk - 1;
  if (check.claims(ATTNCHECK_CAP_KV_LENS)) {
    if (c.key_lengths.empty()) c.key_lengths.assign(size_t(h.B), int32_t(h.Tk));
    c.key_lengths[0] = std::min<int32_t>(c.key_lengths[0], int32_t(j));
  } else {
    if (c.allow.empty()) c.allow.assign(size_t(h.allow_size()), 1);
    for (int64_t i = 0; i < h.Tq; ++i) c.allow[size_t(h.allow_at(0, i) + j)] = 0;
  }
  const std::vector<float> before = check.run_layer(c);
  LayerCase<float> poisoned = c;
  // Large enough that a soft mask value (ONNX Runtime's -10000) lets the key through; 3e4 is near
  // float16's largest, 1e6 past it.
  const double big = is_narrow(c.format) ? check.one_of({1e3, -1e3, 3e4}) : check.one_of({1e3, -1e3, 3e4, 1e6});
  std::vector<float>& x = c.self_attention ? poisoned.x_q : poisoned.x_kv;
  for (int64_t d = 0; d < c.shape.D; ++d)
    x[size_t(c.shape.x_kv_at(0, j) + d)] = float(round_to(c.format, d % 2 ? big : -big / 3));
  const std::vector<float> after = check.run_layer(poisoned);
  // Under --empty-rows mean or any, a query of batch 0 with no permitted key may read every key (a
  // mean of values) or give anything: its output row is not the claim's.
  const EmptyRows policy = c.empty_rows;
  auto claimed_row = [&](int64_t row) {
    if (c.self_attention && row == j) return false;  // query j's own input changed
    if ((policy != EmptyRows::mean && policy != EmptyRows::any) || row >= h.Tq) return true;
    for (int64_t key = 0; key < h.Tk; ++key)
      if (c.permits(0, row, key)) return true;
    return false;
  };
  std::vector<size_t> claimed;
  for (size_t at = 0; at < before.size(); ++at)
    if (claimed_row(int64_t(at) / c.shape.D)) claimed.push_back(at);
  // A kernel whose answers vary between identical calls is not held to bits (answers_vary).
  if (!keeps_bits(before, after, claimed) &&
      answers_vary([&] { return check.run_layer(c); }, before, [&] { return check.run_layer(poisoned); }, after, claimed))
    return;
  for (const size_t at : claimed)
    ATTNCHECK_REQUIRE(check, unchanged(before[at], after[at]),
                      "out element " + std::to_string(at) + " ([b,i,d] with D = " + std::to_string(c.shape.D) + ") moved from " +
                          show(before[at]) + " to " + show(after[at]) + " when the input row of key " + std::to_string(j) +
                          " of batch 0, which no query may see, changed\n" + describe(poisoned));
}

}  // namespace attncheck::properties
