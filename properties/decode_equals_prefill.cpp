// Claim: decode equals prefill: one query against a KV cache (Tq 1, KV-end causal, the cache length
// L as its key length, the keys past L anything) gives row L - 1 of the causal prefill of the first
// L keys, whose last query it is; each call within the oracle's bound of its own problem.
#include <algorithm>

#include "attncheck/property.hpp"

namespace attncheck::properties {

namespace {

// The prefill of batch 0's first L keys of c: Tq = Tk = L, causal (square: either alignment), query
// i of head h c's query i % Tq; no other mask, bias or soft-cap.
Case<float> prefill_of(const Case<float>& c, int64_t L, Causal causal) {
  Case<float> p;
  p.format = c.format;
  p.scale = c.scale;
  p.causal = causal;
  p.shape = {1, c.shape.H, L, L, c.shape.dk, c.shape.dv, c.shape.H_kv};
  const Shape &s = p.shape, &from = c.shape;
  p.q.resize(size_t(s.q_size()));
  p.k.resize(size_t(s.k_size()));
  p.v.resize(size_t(s.v_size()));
  for (int64_t h = 0; h < s.H; ++h) {
    for (int64_t i = 0; i < L; ++i) std::copy_n(c.q.begin() + from.q_at(0, h, i % from.Tq), s.dk, p.q.begin() + s.q_at(0, h, i));
    std::copy_n(c.k.begin() + from.k_at(0, h, 0), L * s.dk, p.k.begin() + s.k_at(0, h, 0));
    std::copy_n(c.v.begin() + from.v_at(0, h, 0), L * s.dv, p.v.begin() + s.v_at(0, h, 0));
  }
  return p;
}

// The decode call of the same query: batch 0's every key of c, key length L, KV-end causal.
Case<float> decode_of(const Case<float>& c, const Case<float>& prefill, int64_t L) {
  Case<float> d = prefill;
  d.causal = Causal::kv_end;
  d.shape.Tq = 1;
  d.shape.Tk = c.shape.Tk;
  d.key_lengths = {int32_t(L)};
  const Shape &s = d.shape, &from = c.shape;
  d.q.resize(size_t(s.q_size()));
  d.k.resize(size_t(s.k_size()));
  d.v.resize(size_t(s.v_size()));
  for (int64_t h = 0; h < s.H; ++h) {
    std::copy_n(prefill.q.begin() + prefill.shape.q_at(0, h, L - 1), s.dk, d.q.begin() + s.q_at(0, h, 0));
    std::copy_n(c.k.begin() + from.k_at(0, h, 0), s.Tk * s.dk, d.k.begin() + s.k_at(0, h, 0));
    std::copy_n(c.v.begin() + from.v_at(0, h, 0), s.Tk * s.dv, d.v.begin() + s.v_at(0, h, 0));
  }
  return d;
}

}  // namespace

ATTNCHECK_PROPERTY(DecodeEqualsPrefill, .order = 230, .catches = "kv_end_as_upper_left",
                   .needs = ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_KV_CACHE | ATTNCHECK_CAP_KV_LENS) {
  const Domain domain = check.domain();
  if (domain.square() || !domain.takes(Causal::kv_end)) return;  // no decode call is inside the kernel's domain
  const Case<float> c = check.draw<float>({.small_only = true});
  const int64_t L = check.in_range(1, c.shape.Tk + 1);  // the cache's length, 1 to Tk
  const Case<float> prefill = prefill_of(c, L, domain.takes(Causal::lower_right) ? Causal::lower_right : Causal::upper_left);
  const Case<float> decode = decode_of(c, prefill, L);
  const std::vector<float> out_prefill = check.run(prefill), out_decode = check.run(decode);
  const Reference ref_prefill = reference(prefill.problem()), ref_decode = reference(decode.problem());
  const Shape& s = decode.shape;
  for (int64_t h = 0; h < s.H; ++h)
    require_rows_agree(check, out_decode, ref_decode, size_t(s.out_at(0, h, 0)), out_prefill, ref_prefill,
                       size_t(prefill.shape.out_at(0, h, L - 1)), s.dv, [&](int64_t col, double x, double y, double allowed) {
                         return "decode at cache length " + std::to_string(L) + ": out[0," + std::to_string(h) + ",0," +
                                std::to_string(col) + "] = " + show(x) + ", but row " + std::to_string(L - 1) +
                                " of the causal prefill of those keys gives " + show(y) + " (allowed " + show(allowed) +
                                ")\ndecode: " + describe(decode) + "\nprefill: " + describe(prefill);
                       });
}

}  // namespace attncheck::properties
