// The attention contract shared by the implementation, the oracle and the tools (docs/contract.md).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "attncheck/policies.hpp"
#include "attncheck/precision.hpp"

namespace attncheck {

// The one shape vocabulary of attncheck, used by every buffer comment in the project:
//   B batch, H query heads, H_kv key/value heads (H % H_kv == 0; query head h reads KV head
//   h / (H / H_kv): grouped-query attention, multi-query when H_kv = 1), Tq queries, Tk keys,
//   dk query/key width, dv value width.
// Buffers are contiguous and row-major: Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv],
// out [B,H,Tq,dv]; scores, weights and bias [B,H,Tq,Tk]; allow [B,Tq,Tk]; key_lengths [B];
// lse [B,H,Tq]; paged, K [NB,H_kv,BS,dk], V [NB,H_kv,BS,dv] and the block table [B,BPS]; varlen,
// Q [H,Tq,dk], K [H_kv,Tk,dk], V [H_kv,Tk,dv], out [H,Tq,dv], lse [H,Tq] and cu_seqlens [B+1]. The *_at
// helpers give where a row starts, so that no code writes an offset by hand (a paged key's row:
// kv_row); h is always a query head (K and V map it to its KV head).
struct Shape {
  int64_t B = 1, H = 1, Tq = 1, Tk = 1, dk = 1, dv = 1;
  int64_t H_kv = 0;  // 0: as many as H (every query head its own keys and values)
  // Paged KV (ATTNCHECK_CAP_PAGED_KV): K [NB,H_kv,BS,dk] and V [NB,H_kv,BS,dv] are pools of NB blocks
  // of BS keys, BPS blocks a sequence through the block table [B,BPS] (Problem's); key j of batch b is
  // slot j % BS of block table[b][j / BS]. BS 0: dense, K and V as below.
  int64_t NB = 0, BS = 0, BPS = 0;
  bool paged() const { return BS > 0; }
  // Varlen (ATTNCHECK_CAP_VARLEN): the B sequences packed along Tq and Tk, which are then their
  // totals; the buffers are a B = 1 problem's (Q [H,Tq,dk] ...), sequence b's queries rows
  // cu_seqlens_q[b] to cu_seqlens_q[b+1] - 1 and its keys likewise (Problem's cu_seqlens, [B+1]).
  bool varlen = false;
  // The batches the buffers hold: B, or the one a varlen call packs its sequences into.
  int64_t batches() const { return varlen ? 1 : B; }

  int64_t kv_heads() const { return H_kv > 0 ? H_kv : H; }
  int64_t kv_head(int64_t h) const { return h / (H / kv_heads()); }

  int64_t q_at(int64_t b, int64_t h, int64_t i) const { return ((b * H + h) * Tq + i) * dk; }
  // Dense K and V only (a paged key's row is kv_row's).
  int64_t k_at(int64_t b, int64_t h, int64_t j) const { return ((b * kv_heads() + kv_head(h)) * Tk + j) * dk; }
  int64_t v_at(int64_t b, int64_t h, int64_t j) const { return ((b * kv_heads() + kv_head(h)) * Tk + j) * dv; }
  int64_t out_at(int64_t b, int64_t h, int64_t i) const { return ((b * H + h) * Tq + i) * dv; }
  int64_t scores_at(int64_t b, int64_t h, int64_t i) const { return ((b * H + h) * Tq + i) * Tk; }
  int64_t lse_at(int64_t b, int64_t h, int64_t i) const { return (b * H + h) * Tq + i; }
  int64_t allow_at(int64_t b, int64_t i) const { return (b * Tq + i) * Tk; }
  // The index of query i of batch b among the B * Tq (batch, query) rows: allow's rows, one per query.
  int64_t query_row(int64_t b, int64_t i) const { return b * Tq + i; }

  int64_t q_size() const { return batches() * H * Tq * dk; }
  int64_t k_size() const { return kv_rows() * dk; }
  int64_t v_size() const { return kv_rows() * dv; }
  int64_t kv_rows() const { return (paged() ? NB * BS : batches() * Tk) * kv_heads(); }
  int64_t out_size() const { return batches() * H * Tq * dv; }
  int64_t scores_size() const { return batches() * H * Tq * Tk; }
  int64_t lse_size() const { return batches() * H * Tq; }
  int64_t allow_size() const { return batches() * Tq * Tk; }
};

// Which keys a query may see by position. upper_left: j <= i (PyTorch is_causal);
// lower_right: j <= i + Tk - Tq (FlashAttention 2.1+); kv_end: j <= i + kv_lens[b] - Tq, the
// diagonal at each batch's own cache length (a KV cache: FlashAttention's flash_attn_with_kvcache
// with cache_seqlens; lower_right without key lengths). Values match plugin ABI v1 and v2.
enum class Causal : int32_t { none = 0, upper_left = 1, lower_right = 2, kv_end = 3 };
// Every mode, in code order, and its name in case texts, reports, the protocol's Python client
// and attncheck compare's --causal.
inline constexpr Causal kCausalModes[] = {Causal::none, Causal::upper_left, Causal::lower_right, Causal::kv_end};
inline constexpr const char* kCausalNames[] = {"none", "upper-left", "lower-right", "kv-end"};

// The masks, combined by AND: key j is permitted for query i of batch b when all of them allow it
// (permits, below).
struct Masks {
  const uint8_t* allow = nullptr;  // [B,Tq,Tk]; nonzero = may attend; null = all allowed
  Causal causal = Causal::none;
  const int32_t* key_lengths = nullptr;  // [B]; keys j >= key_lengths[b] are padding; null = none
  // A sliding window, FlashAttention's inclusive convention with queries aligned to the last Tq
  // keys: key j needs i + Tk - Tq - window_left <= j <= i + Tk - Tq + window_right; -1 = unbounded.
  int64_t window_left = -1, window_right = -1;
};

// One attention problem: softmax(cap(scale * Q K^T) + bias, over permitted keys) V, cap the soft-cap.
template <class T>
struct Problem {
  Shape shape;
  const T* q = nullptr;  // [B,H,Tq,dk]
  const T* k = nullptr;  // [B,H_kv,Tk,dk], or paged [NB,H_kv,BS,dk]
  const T* v = nullptr;  // [B,H_kv,Tk,dv], or paged [NB,H_kv,BS,dv]
  Masks masks;
  const T* bias = nullptr;                 // [B,H,Tq,Tk], added to the scores (after the soft-cap); -inf forbids; null = none
  double scale = 0;                        // 0 = default 1/sqrt(dk), the width of one head
  double softcap = 0;                      // 0 = none; else a score is softcap tanh(scale q.k / softcap), before bias and masks
  EmptyRows empty_rows = EmptyRows::zero;  // the policies a row with no permitted key follows (policies.hpp)
  LseEmpty lse_empty = LseEmpty::ninf;
  // The format the kernel's buffers are in: T's own, or (T = float) a 2-byte one, f16 or bf16,
  // whose values q, k, v and bias hold exactly. A kernel then computes in float or better and
  // rounds out to the format; lse stays float (docs/error-bound.md, "Low precision").
  Format format = Precision<T>::format;
  // Dropout on the weights, after the softmax (PyTorch's order): each weight p_ij kept with
  // probability 1 - dropout_p and then divided by 1 - dropout_p, or set to 0; lse stays that of
  // the weights before dropout. 0 = none.
  double dropout_p = 0;
  uint64_t dropout_seed = 0;              // the kernel's own random stream: one seed, one mask
  const uint8_t* dropout_keep = nullptr;  // [B,H,Tq,Tk], nonzero = kept: the mask to apply, as PyTorch's
                                          // math backend takes one (the oracle needs it); null = draw one from the seed
  // Attention sinks (gpt-oss): one logit per query head, float in every format, that every row's
  // softmax denominator gains as exp(sink_h - m) with no value: not scaled, soft-capped or masked.
  // The lse includes it; a row with no permitted key gives 0 and lse sink_h. -inf: no sink. null = none.
  const float* sinks = nullptr;  // [H]
  // Paged KV: with a paged shape, k and v are pools read through this table (Shape, kv_row).
  const int32_t* block_table = nullptr;  // [B,BPS]; null = dense
  // Varlen: with a varlen shape, each sequence's first query row and first key row, and the totals.
  const int32_t* cu_seqlens_q = nullptr;  // [B+1]; null = dense
  const int32_t* cu_seqlens_k = nullptr;  // [B+1]
};

// The row of K (dk wide) and V (dv wide) that holds key j of batch b for query head h: k_at / dk, or
// in a paged shape slot j % BS of block table[b][j / BS] ([B,BPS]).
inline int64_t kv_row(const Shape& s, const int32_t* table, int64_t b, int64_t h, int64_t j) {
  if (!s.paged()) return (b * s.kv_heads() + s.kv_head(h)) * s.Tk + j;
  return (table[b * s.BPS + j / s.BS] * s.kv_heads() + s.kv_head(h)) * s.BS + j % s.BS;
}

// What a dense twin (dense_of) holds that its problem does not: gathered keys and values, a built mask.
template <class T>
struct TwinBuffers {
  std::vector<T> k, v;         // [B,H_kv,Tk,dk], [B,H_kv,Tk,dv]: a paged problem's keys gathered
  std::vector<uint8_t> allow;  // [1,Tq,Tk]: a varlen problem's sequences as one mask
};

// A problem's dense twin, whose buffers (`twin`'s among them) must outlive it; the problem itself
// when dense. Paged KV: its keys and values gathered through the block table. Varlen: the packed
// tensors themselves as a B = 1 problem whose allow mask lets packed query r of sequence b see
// packed key c when c is one of b's keys and b's masks permit (r - cu_seqlens_q[b], c -
// cu_seqlens_k[b]) in its own [Tq_b, Tk_b] scores; no other mask beside it. Each is an index map of
// the same mathematics: the oracle and the built-in compute on the twin.
template <class T>
Problem<T> dense_of(const Problem<T>& problem, TwinBuffers<T>& twin);

// The gather itself, each key's K and V rows read from offset(b, h, j, width) of the pools (width dk
// for K, dv for V; h the first query head of its KV head): dense_of's, and a planted bug's own.
template <class T, class Offset>
Problem<T> gathered_through(const Problem<T>& p, std::vector<T>& k, std::vector<T>& v, Offset offset) {
  Problem<T> dense = p;
  Shape& s = dense.shape;
  s.NB = s.BS = s.BPS = 0;
  dense.block_table = nullptr;
  k.resize(size_t(s.k_size()));
  v.resize(size_t(s.v_size()));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; h += s.H / s.kv_heads())
      for (int64_t j = 0; j < s.Tk; ++j) {
        std::copy_n(p.k + offset(b, h, j, s.dk), s.dk, k.begin() + s.k_at(b, h, j));
        std::copy_n(p.v + offset(b, h, j, s.dv), s.dv, v.begin() + s.v_at(b, h, j));
      }
  dense.k = k.data();
  dense.v = v.data();
  return dense;
}

// Whether head h of `problem` has a sink that takes weight (a sinks slot and sinks[h] > -inf).
template <class T>
bool has_sink(const Problem<T>& problem, int64_t h) {
  return problem.sinks && problem.sinks[h] > -std::numeric_limits<float>::infinity();
}

// Where the results go: out always, weights, log-sum-exp and the dropout keep mask on request.
template <class T>
struct Result {
  T* out = nullptr;         // [B,H,Tq,dv]
  T* weights = nullptr;     // [B,H,Tq,Tk]; forbidden keys get exactly 0; after dropout when there is any; null = not wanted
  T* lse = nullptr;         // [B,H,Tq]; log of the sum of exp over permitted scores; null = not wanted
  uint8_t* keep = nullptr;  // [B,H,Tq,Tk]; with dropout, 1 where a weight was kept and 0 where dropped; null = not wanted
};

// The factor dropout multiplies a kept weight by: 1 / (1 - p) (1 without dropout).
inline double dropout_rescale(double p) { return 1 / (1 - p); }

// The backward pass's buffers: the forward's results as inputs (the exact out and lse rounded to
// their formats, as FlashAttention's backward receives them), the output gradient, and the
// gradients written. dk and dv are per KV head: summed over the query heads of its group.
template <class T>
struct Grads {
  const T* out = nullptr;   // [B,H,Tq,dv]
  const T* lse = nullptr;   // [B,H,Tq]; -inf for an empty row
  const T* dout = nullptr;  // [B,H,Tq,dv]
  T* dq = nullptr;          // [B,H,Tq,dk]
  T* dk = nullptr;          // [B,H_kv,Tk,dk]
  T* dv = nullptr;          // [B,H_kv,Tk,dv]
};

// The scale actually applied: `scale`, or 1/sqrt(dk) when it is 0.
double effective_scale(const Shape& shape, double scale);

// Whether the causal rule lets query i see key j in a [Tq,Tk] score matrix whose batch holds
// `keys` keys (its key length, Tk without one: where kv_end puts the diagonal).
bool causal_allows(Causal causal, int64_t i, int64_t j, int64_t Tq, int64_t Tk, int64_t keys);

// Whether the sliding window (Masks) lets query i see key j in a [Tq,Tk] score matrix.
bool window_allows(int64_t left, int64_t right, int64_t i, int64_t j, int64_t Tq, int64_t Tk);

// Whether the masks let query i of batch b see key j, the bias aside: the one mask rule, which
// the implementation, the variants, the case generator, the properties, describe and the
// ABI conversion all use. (The oracle keeps a reading of its own, on purpose: oracles/tests shows
// the two agree on every kind of mask.)
bool permits(const Masks& masks, const Shape& shape, int64_t b, int64_t i, int64_t j);

// Sequence b of a varlen problem: its queries' and keys' first packed rows and counts.
struct Sequence {
  int64_t first_q, Tq, first_k, Tk;
};
template <class T>
Sequence sequence(const Problem<T>& p, int64_t b) {
  return {p.cu_seqlens_q[b], p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b], p.cu_seqlens_k[b],
          p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b]};
}
// Whether p's masks (causal, window) let query i see key j of a sequence of Tq queries and Tk keys.
template <class T>
bool sequence_permits(const Problem<T>& p, int64_t i, int64_t j, int64_t Tq, int64_t Tk) {
  Shape one = p.shape;
  one.B = 1, one.Tq = Tq, one.Tk = Tk, one.varlen = false;
  return permits(Masks{nullptr, p.masks.causal, nullptr, p.masks.window_left, p.masks.window_right}, one, 0, i, j);
}

// The varlen twin itself, packed query r of sequence b seeing packed key c where sees(b, r, c):
// dense_of's (contract's rule), and a planted bug's own.
template <class T, class Sees>
Problem<T> unpacked_through(const Problem<T>& p, std::vector<uint8_t>& allow, Sees sees) {
  Problem<T> dense = p;
  Shape& s = dense.shape;
  s.B = 1, s.varlen = false;
  dense.cu_seqlens_q = dense.cu_seqlens_k = nullptr;
  dense.masks = Masks{};
  allow.assign(size_t(s.allow_size()), 0);
  for (int64_t b = 0; b < p.shape.B; ++b)
    for (int64_t r = p.cu_seqlens_q[b]; r < p.cu_seqlens_q[b + 1]; ++r)
      for (int64_t c = 0; c < s.Tk; ++c) allow[size_t(s.allow_at(0, r) + c)] = sees(b, r, c);
  dense.masks.allow = allow.data();
  return dense;
}

// Empty when the problem is well formed; otherwise a one-line reason (a dim below 1 or too
// large, a missing buffer, an unknown causal mode, a non-finite scale, a negative key length, a
// window side below -1 or past 2^31 - 1 (what ABI v2 carries), a soft-cap that is negative or not finite, a format that is not
// T's own or a 2-byte one over float, a value of q, k, v or bias that its format cannot hold, a dropout rate outside [0, 1)).
template <class T>
std::string problem_error(const Problem<T>& problem, const Result<T>& result);

// Its parts, which the layer's check shares (layer.hpp): a dim out of range or H_kv not dividing
// H; a bad causal mode, scale, window side or key length; a format T cannot carry, or an input
// (name, buffer, count) holding a value its 2-byte format cannot.
std::string shape_error(const Shape& shape);
std::string paging_error(const Shape& shape);  // the paged dims: each at least 1, the pools within 2^31 elements
template <class T>
std::string varlen_error(const Problem<T>& problem);  // cu_seqlens: from 0, nondecreasing, to the totals; no other masks
std::string masks_error(const Masks& masks, const Shape& shape, double scale);
template <class T>
std::string format_error(Format format, std::initializer_list<std::pair<const char*, std::pair<const T*, int64_t>>> inputs);

}  // namespace attncheck
