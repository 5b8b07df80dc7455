#include "backward.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace attncheck {
namespace {

using BM = BackwardMutation;

// The masks as the backward reads them: the forward's, or the mutant's: none at all (flash-attention
// 1947), upper-left for lower-right (ffpa-attn 300), upper-left where there was none (triton 4541).
Masks masks_as_read(const Masks& forward, const BackwardVariant& v) {
  Masks masks = forward;
  if (v.mutation == BM::p_not_zeroed_at_masked) masks = Masks{};
  if (v.mutation == BM::causal_upper_left_in_backward && masks.causal == Causal::lower_right) masks.causal = Causal::upper_left;
  if (v.mutation == BM::always_causal && masks.causal == Causal::none) masks.causal = Causal::upper_left;
  return masks;
}

// The variant's backward of one problem: Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], bias
// [B,H,Tq,Tk], out [B,H,Tq,dv], lse [B,H,Tq], dout [B,H,Tq,dv] in; dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk],
// dv [B,H_kv,Tk,dv] out. Per (b, h): pass 1 row by row (scores, P, dP, D), pass 2 by key tiles (the
// products); pass 3 rounds every gradient to T once.
template <class T, class A>
struct Backward {
  Backward(const Problem<T>& problem, const Grads<T>& grads, const BackwardVariant& variant) : p(problem), g(grads), v(variant) {}

  const Problem<T>& p;
  const Grads<T>& g;
  const BackwardVariant& v;
  const Shape& s = p.shape;
  static constexpr A minus_inf = -std::numeric_limits<A>::infinity();
  const A scale = A(effective_scale(s, p.scale)), cap = A(p.softcap);
  const int64_t G = s.H / s.kv_heads();  // query heads per KV head
  const Masks masks = masks_as_read(p.masks, v);
  // In f16 and bf16: P and dT in the format for their products (round_to_format), and every gradient
  // rounded to it once at the end.
  const bool narrow = is_narrow(p.format), round_products = narrow && v.round_to_format;
  // Key tiles of `width` keys (outer loop), query tiles of `rows` queries (inner loop).
  const int64_t width = v.key_tile > 0 ? v.key_tile : s.Tk, rows = v.query_tile > 0 ? v.query_tile : s.Tq;

  // The gradients, accumulated in A over every (b, h) and rounded to T once: dq [B,H,Tq,dk],
  // dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv].
  std::vector<A> dq_sum = std::vector<A>(size_t(s.q_size())), dk_sum = std::vector<A>(size_t(s.k_size())),
                 dv_sum = std::vector<A>(size_t(s.v_size()));
  // Per (b, h): scores s [Tq,Tk] (-inf where forbidden) and tanh(t / cap) [Tq,Tk], weights P [Tq,Tk],
  // dP [Tq,Tk], D [Tq]; one key tile's dK [width,dk] and dV [width,dv]; one row's dQ over a key tile [dk].
  std::vector<A> score = std::vector<A>(size_t(s.Tq * s.Tk)), tanh_t = score, weight = score, dP = score;
  std::vector<A> D = std::vector<A>(size_t(s.Tq)), dK_tile = std::vector<A>(size_t(width * s.dk)),
                 dV_tile = std::vector<A>(size_t(width * s.dv)), dQ_i = std::vector<A>(size_t(s.dk));
  int64_t b = 0, h = 0;  // the (b, h) being computed

  A in_format(A x) const { return round_products ? A(round_to(p.format, double(x))) : x; }

  void run();
  void scores(int64_t i);
  void weights(int64_t i);
  void dP_and_D(int64_t i);
  void key_tile(int64_t j0, int64_t j1);
  void row_products(int64_t i, int64_t j0, int64_t j1);
  void add_tile(int64_t j0, int64_t j1);
};

template <class T, class A>
void Backward<T, A>::run() {
  for (b = 0; b < s.B; ++b)
    for (h = 0; h < s.H; ++h) {
      // Pass 1, row by row: the scores of the keys the masks permit and the bias does not forbid (no
      // other key's k or v is read), then P, dP and D the variant's way.
      for (int64_t i = 0; i < s.Tq; ++i) {
        scores(i);
        weights(i);
        dP_and_D(i);
      }
      // Pass 2: the products, key tiles outer and query tiles inner, over the keys that carry weight.
      for (int64_t j0 = 0; j0 < s.Tk; j0 += width) key_tile(j0, std::min(s.Tk, j0 + width));
    }

  // Pass 3: every gradient to T once, through the format in f16 and bf16.
  auto store = [&](const std::vector<A>& from, T* to) {
    for (size_t n = 0; n < from.size(); ++n) to[n] = T(narrow ? round_to(p.format, double(from[n])) : from[n]);
  };
  store(dq_sum, g.dq);
  store(dk_sum, g.dk);
  store(dv_sum, g.dv);
}

// Row i's scores s_i [Tk] (-inf where forbidden) and tanh(t_i / cap) [Tk]; P's row [Tk] set to 0.
template <class T, class A>
void Backward<T, A>::scores(int64_t i) {
  const T* q_i = p.q + s.q_at(b, h, i);
  A* score_i = &score[size_t(i * s.Tk)];
  A* tanh_i = &tanh_t[size_t(i * s.Tk)];
  A* p_i = &weight[size_t(i * s.Tk)];
  for (int64_t j = 0; j < s.Tk; ++j) {
    score_i[j] = minus_inf;
    p_i[j] = 0;
    const A bias_ij = p.bias ? A(p.bias[s.scores_at(b, h, i) + j]) : A(0);
    if (!permits(masks, s, b, i, j) || bias_ij == minus_inf) continue;
    const T* k_j = p.k + s.k_at(b, h, j);
    A dot = 0;
    for (int64_t c = 0; c < s.dk; ++c) dot += A(q_i[c]) * A(k_j[c]);
    // Forward: s_ij = cap(t_ij) + bias_ij, t_ij = scale q_i . k_j, cap(t) = softcap tanh(t / softcap).
    tanh_i[j] = cap != 0 ? std::tanh(scale * dot / cap) : A(0);
    score_i[j] = (cap != 0 ? cap * tanh_i[j] : scale * dot) + bias_ij;
  }
}

// Row i's weights P_i [Tk]. The keys that carry weight are those whose score is not -inf, as in the
// forward. Forward: p_ij = exp(s_ij - lse_i), lse_i = log sum_j exp(s_ij): from the saved lse, or the
// softmax of the row (max, exp, sum, divide).
template <class T, class A>
void Backward<T, A>::weights(int64_t i) {
  const A* score_i = &score[size_t(i * s.Tk)];
  A* p_i = &weight[size_t(i * s.Tk)];
  if (v.p_from_lse) {
    const A lse_i = A(g.lse[s.lse_at(b, h, i)]);
    for (int64_t j = 0; j < s.Tk; ++j)
      if (score_i[j] != minus_inf) p_i[j] = std::exp(score_i[j] - lse_i);
    return;
  }
  A m = minus_inf, l = 0;
  for (int64_t j = 0; j < s.Tk; ++j) m = std::max(m, score_i[j]);
  for (int64_t j = 0; j < s.Tk; ++j)
    if (score_i[j] != minus_inf) {
      p_i[j] = std::exp(score_i[j] - m);
      l += p_i[j];
    }
  for (int64_t j = 0; j < s.Tk; ++j)
    if (score_i[j] != minus_inf) p_i[j] /= l;
}

// Row i's dP_i [Tk] and D_i: dP_ij = dout_i . v_j. Forward: out_i = sum_j p_ij v_j, so D_i = sum_j
// p_ij dP_ij = dout_i . out_i: the sum, or from the forward's out (FlashAttention-2's preprocessing;
// the mutant's dout_i . dout_i).
template <class T, class A>
void Backward<T, A>::dP_and_D(int64_t i) {
  const T* dout_i = g.dout + s.out_at(b, h, i);
  const A* score_i = &score[size_t(i * s.Tk)];
  const A* p_i = &weight[size_t(i * s.Tk)];
  A* dP_i = &dP[size_t(i * s.Tk)];
  A& D_i = D[size_t(i)];
  D_i = 0;
  for (int64_t j = 0; j < s.Tk; ++j) {
    if (score_i[j] == minus_inf) continue;
    const T* v_j = p.v + s.v_at(b, h, j);
    dP_i[j] = 0;
    for (int64_t c = 0; c < s.dv; ++c) dP_i[j] += A(dout_i[c]) * A(v_j[c]);
    if (!v.d_from_out) D_i += p_i[j] * dP_i[j];
  }
  if (v.d_from_out) {
    const T* out_i = v.mutation == BM::d_from_other_output ? dout_i : g.out + s.out_at(b, h, i);
    for (int64_t c = 0; c < s.dv; ++c) D_i += A(dout_i[c]) * A(out_i[c]);
  }
}

// Key tile [j0, j1): its dK [width,dk] and dV [width,dv] summed over the query tiles, each row's dQ
// over the tile added to dq; then the tile's dK and dV added to the KV head's.
template <class T, class A>
void Backward<T, A>::key_tile(int64_t j0, int64_t j1) {
  std::fill(dK_tile.begin(), dK_tile.end(), A(0));
  std::fill(dV_tile.begin(), dV_tile.end(), A(0));
  for (int64_t i0 = 0; i0 < s.Tq; i0 += rows)
    for (int64_t i = i0; i < std::min(s.Tq, i0 + rows); ++i) row_products(i, j0, j1);
  add_tile(j0, j1);
}

// Row i's products with key tile [j0, j1): into dV_tile and dK_tile, and its dQ_i [dk] over the
// tile into dq.
template <class T, class A>
void Backward<T, A>::row_products(int64_t i, int64_t j0, int64_t j1) {
  const T* q_i = p.q + s.q_at(b, h, i);
  const T* dout_i = g.dout + s.out_at(b, h, i);
  std::fill(dQ_i.begin(), dQ_i.end(), A(0));
  for (int64_t j = j0; j < j1; ++j) {
    const size_t ij = size_t(i * s.Tk + j);
    if (score[ij] == minus_inf) continue;
    const T* k_j = p.k + s.k_at(b, h, j);
    // Forward: out_i = sum_j p_ij v_j.
    const A p_ij = in_format(weight[ij]);
    for (int64_t c = 0; c < s.dv; ++c) dV_tile[size_t((j - j0) * s.dv + c)] += p_ij * A(dout_i[c]);
    // Forward: p_ij = exp(s_ij - lse_i), and s_ij = softcap tanh(t_ij / softcap) + bias_ij.
    const A dS_ij = weight[ij] * (dP[ij] - D[size_t(i)]);
    const bool capped = cap != 0 && v.mutation != BM::softcap_derivative_missing;
    const A dT_ij = in_format(capped ? dS_ij * (1 - tanh_t[ij] * tanh_t[ij]) : dS_ij);
    // Forward: t_ij = scale q_i . k_j (the scale applied once per sum, below).
    for (int64_t c = 0; c < s.dk; ++c) {
      dQ_i[size_t(c)] += dT_ij * A(k_j[c]);
      dK_tile[size_t((j - j0) * s.dk + c)] += dT_ij * A(q_i[c]);
    }
  }
  for (int64_t c = 0; c < s.dk; ++c) dq_sum[size_t(s.q_at(b, h, i) + c)] += scale * dQ_i[size_t(c)];
}

// The tile's dK [width,dk] and dV [width,dv] join their KV head's, summed over the query heads of its
// group (the mutant's: the group's first head only), dK scaled once (the mutant forgets it); dV
// written at its own offsets (the mutant's: j dk + c, wrapped into the head's [Tk,dv] block).
template <class T, class A>
void Backward<T, A>::add_tile(int64_t j0, int64_t j1) {
  if (v.mutation == BM::dkdv_not_summed_over_group && h % G != 0) return;
  const A dK_scale = v.mutation == BM::dk_scale_missing ? A(1) : scale;
  for (int64_t j = j0; j < j1; ++j) {
    for (int64_t c = 0; c < s.dk; ++c) dk_sum[size_t(s.k_at(b, h, j) + c)] += dK_scale * dK_tile[size_t((j - j0) * s.dk + c)];
    for (int64_t c = 0; c < s.dv; ++c) {
      const int64_t at =
          v.mutation == BM::dv_indexed_with_dk ? s.v_at(b, h, 0) + (j * s.dk + c) % (s.Tk * s.dv) : s.v_at(b, h, j) + c;
      dv_sum[size_t(at)] += dV_tile[size_t((j - j0) * s.dv + c)];
    }
  }
}

template <class T, class A>
void run(const Problem<T>& p, const Grads<T>& g, const BackwardVariant& v) {
  Backward<T, A>(p, g, v).run();
}

// FlashAttention-2's backward: P from the saved lse, D = rowsum(dout * out), key tiles of 64 outer
// and query tiles of 128 inner.
constexpr BackwardVariant kFlash{.key_tile = 64, .query_tile = 128};

}  // namespace

const std::vector<NamedBackward>& correct_backward_variants() {
  static const std::vector<NamedBackward> all = {
      {"two_pass_backward", {.p_from_lse = false, .d_from_out = false}},
      {"flash_backward", kFlash},
      {"double_backward", {.accumulate_double = true, .p_from_lse = false, .d_from_out = false}},
      {"rounded_backward",
       [] {
         BackwardVariant rounded = kFlash;
         rounded.round_to_format = true;
         return rounded;
       }()},
  };
  return all;
}

BackwardVariant backward_mutant(BackwardMutation mutation) {
  BackwardVariant kernel = kFlash;
  kernel.mutation = mutation;
  return kernel;
}

template <class T>
void variant_backward(const Problem<T>& p, const Grads<T>& g, const BackwardVariant& v) {
  if (v.accumulate_double)
    run<T, double>(p, g, v);
  else
    run<T, T>(p, g, v);
}

template void variant_backward(const Problem<float>&, const Grads<float>&, const BackwardVariant&);
template void variant_backward(const Problem<double>&, const Grads<double>&, const BackwardVariant&);

}  // namespace attncheck
