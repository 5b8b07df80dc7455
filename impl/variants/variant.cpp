#include "variant.hpp"

#include "attncheck/dropout.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#ifdef __SSE__
#include <xmmintrin.h>
#endif

namespace attncheck {
namespace {

using M = Mutation;

#ifdef __SSE__
constexpr unsigned kFlushToZero = 1u << 15, kDenormalsAreZero = 1u << 6;  // MXCSR bits
#endif

// Left-to-right or pairwise sum of x [n].
template <class A>
A sum(const A* x, int64_t n, bool pairwise) {
  if (!pairwise || n <= 2) {
    A total = 0;
    for (int64_t j = 0; j < n; ++j) total += x[j];
    return total;
  }
  return sum(x, n / 2, true) + sum(x + n / 2, n - n / 2, true);
}

// exp(x) through 2^f on [0, 1) by a quadratic: about 1.7e-3 relative error, varying with x.
template <class A>
A approx_exp(A x) {
  const A t = x * A(1.4426950408889634);
  const A k = std::floor(t), f = t - k;
  const int exponent = std::isnan(k) ? 0 : int(std::clamp(k, A(-1000), A(1000)));  // no UB on inf or NaN
  return std::ldexp(A(1) + f * (A(0.6565) + A(0.3435) * f), exponent);
}

// exp(s - m) the variant's way.
template <class A>
A exp_shifted(A s, A m, const Variant& v) {
  if (v.exp2) {
    const A log2e = A(1.4426950408889634);
    return std::exp2(s * log2e - m * log2e);
  }
  return v.mutation == M::approx_exp ? approx_exp(s - m) : std::exp(s - m);
}

// x rounded to the 2-byte format F (Half: 11 significant bits, inf past 65504; BFloat16: 8), ties
// to even.
template <class F, class A>
A to(A x) {
  return A(round_to<F>(double(x)));
}

// The score a forbidden key gets under a sentinel mutation; NaN when it stays out.
double forbidden_score(M m) {
  switch (m) {
    case M::forbidden_zero:
      return 0;
    case M::sentinel_1e4:
      return -1e4;
    case M::sentinel_1e9:
      return -1e9;
    case M::sentinel_flt_max:
      return -FLT_MAX;
    default:
      return std::numeric_limits<double>::quiet_NaN();
  }
}

// a / b rounded down and up, for b > 0 and a of either sign (C++'s / truncates toward zero).
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// The softmax of some keys, as an online pass carries it: the running maximum m, the normalizer
// l = sum_t exp(s_t - m) and the accumulator acc_c = sum_t exp(s_t - m) v_tc. Empty (m = -inf,
// l = 0, acc = 0) until a key with weight arrives.
template <class A>
struct Running {
  A m = 0, l = 0;
  std::vector<A> acc;  // [dv]
  explicit Running(int64_t dv) : acc(size_t(dv)) { reset(); }
  void reset() {
    m = -std::numeric_limits<A>::infinity();
    l = 0;
    std::fill(acc.begin(), acc.end(), A(0));
  }
};

// The scale c as the variant reads it: the contract's (the caller's, or 1/sqrt(dk) by default), or
// the mutant's: 1/sqrt(H dk) by default, 1, 1/sqrt(dk) whatever the caller gives, or 1/c.
template <class T>
double scale_as_read(const Problem<T>& p, const Variant& v) {
  const Shape& s = p.shape;
  double c = effective_scale(s, p.scale);
  if (p.scale == 0 && v.mutation == M::model_width_scale) c = 1 / std::sqrt(double(s.H * s.dk));
  if (v.mutation == M::no_scale) c = 1;
  if (v.mutation == M::explicit_scale_ignored) c = 1 / std::sqrt(double(s.dk));
  if (v.mutation == M::divide_by_scale) c = 1 / c;
  return c;
}

// The causal mask as the variant reads it: the contract's, or the mutant's with upper-left and
// lower-right exchanged, or KV-end read as upper-left or as lower-right (the padded cache's end).
Causal causal_as_read(Causal causal, const Variant& v) {
  if (causal == Causal::kv_end && v.mutation == M::kv_end_as_upper_left) return Causal::upper_left;
  if (causal == Causal::kv_end && v.mutation == M::kv_end_at_the_last_key) return Causal::lower_right;
  return v.mutation != M::causal_swapped ? causal
         : causal == Causal::upper_left  ? Causal::lower_right
         : causal == Causal::lower_right ? Causal::upper_left
                                         : causal;
}

// The masks as the variant reads them: the contract's, or the mutant's misreading of them (padding
// skipped, allow [B,Tq,Tk] inverted, key lengths [B] all the batch's longest, the window its own way).
template <class T>
class MasksAsRead {
 public:
  MasksAsRead(const Problem<T>& p, const Variant& v) : p_(p), v_(v) {
    const Shape& s = p.shape;
    const Causal causal = causal_as_read(p.masks.causal, v);
    const bool skip_padding = (v.mutation == M::causal_ignores_padding && causal != Causal::none) ||
                              (v.mutation == M::decode_path_ignores_mask && s.Tq == 1);
    if (v.mutation == M::inverted_polarity) {
      flipped_.assign(size_t(s.allow_size()), 0);
      for (size_t n = 0; p.masks.allow && n < flipped_.size(); ++n) flipped_[n] = !p.masks.allow[n];
    }
    if (v.mutation == M::kv_lens_batch_max && p.masks.key_lengths)
      longest_.assign(size_t(s.B), *std::max_element(p.masks.key_lengths, p.masks.key_lengths + s.B));
    masks = Masks{skip_padding       ? nullptr
                  : flipped_.empty() ? p.masks.allow
                                     : flipped_.data(),
                  causal,
                  skip_padding       ? nullptr
                  : longest_.empty() ? p.masks.key_lengths
                                     : longest_.data(),
                  window_mutant_ ? -1 : p.masks.window_left, window_mutant_ ? -1 : p.masks.window_right};
  }
  MasksAsRead(const MasksAsRead&) = delete;  // masks points into flipped_ and longest_
  MasksAsRead& operator=(const MasksAsRead&) = delete;

  // The window mutant's reading of window (left, right) around the diagonal c = i + Tk - Tq: the
  // contract's c - left <= j <= c + right with the right bound dropped (jax PR 39576), or c = i
  // (ffpa-attn 300), or without the keys at the bounds (transformers 39408), or without c itself
  // (onnxruntime 25927). Every key for a mutant with no window, as for the others.
  bool in_window(int64_t i, int64_t j) const {
    const Shape& s = p_.shape;
    const int64_t left = p_.masks.window_left, right = v_.mutation == M::window_right_dropped ? -1 : p_.masks.window_right;
    if (!window_mutant_ || (left < 0 && right < 0)) return true;
    const int64_t Tq = v_.mutation == M::window_upper_left ? s.Tk : s.Tq;  // a diagonal through (0, 0)
    const int64_t c = i + s.Tk - Tq;
    const bool at_bound = (left >= 0 && j == c - left) || (right >= 0 && j == c + right);
    return window_allows(left, right, i, j, Tq, s.Tk) && !(v_.mutation == M::window_exclusive && at_bound) &&
           !(v_.mutation == M::window_excludes_current && j == c);
  }
  // Whether the variant's masks forbid key j to query i of batch b.
  bool masked(int64_t b, int64_t i, int64_t j) const { return !permits(masks, p_.shape, b, i, j) || !in_window(i, j); }

 private:
  const Problem<T>& p_;
  const Variant& v_;
  // A window mutant takes the window out of the masks and reads it its own way (in_window).
  const bool window_mutant_ = v_.mutation == M::window_exclusive || v_.mutation == M::window_excludes_current ||
                              v_.mutation == M::window_right_dropped || v_.mutation == M::window_upper_left;
  std::vector<uint8_t> flipped_;  // allow [B,Tq,Tk] read as MultiheadAttention's true = blocked
  std::vector<int32_t> longest_;  // key lengths [B]: the batch's longest for every sequence

 public:
  Masks masks;  // the variant's masks, window_mutant_'s window taken out
};

// The KV head g that query head h reads: h / G, G = H / H_kv the group size; or the mutant's
// h % H_kv (onnx PR 7274), h / G' with G' the largest power of two <= G, clamped to the last KV
// head (llama.cpp 19115), or 0.
int64_t kv_group_as_read(const Shape& s, int64_t h, const Variant& v) {
  const int64_t H_kv = s.kv_heads(), G = s.H / H_kv;
  int64_t g = h / G;
  if (v.mutation == M::gqa_heads_interleaved) g = h % H_kv;
  if (v.mutation == M::gqa_group_power_of_two) g = std::min(h / int64_t(std::bit_floor(uint64_t(G))), H_kv - 1);
  if (v.mutation == M::shared_kv_heads) g = 0;
  return g;
}

// A kept weight's dropout factor: 1 / (1 - p), or the mutant's 1 or 1 - p.
double kept_factor_as_read(double dropout_p, const Variant& v) {
  return v.mutation == M::dropout_no_rescale         ? 1
         : v.mutation == M::dropout_rescaled_by_keep ? 1 - dropout_p
                                                     : dropout_rescale(dropout_p);
}

// Dropout as the variant does it: weight (b, h, i, j)'s Philox draw at its [B,H,Tq,Tk] index, and a
// kept weight's factor 1 / (1 - p); or the mutants' stream, rate, factor and place (before the
// softmax, on the output).
template <class A>
struct DropoutAsRead {
  template <class T>
  DropoutAsRead(const Problem<T>& problem, const Variant& variant)
      : p(problem.dropout_p),
        format(problem.format),
        v(variant),
        seed(variant.mutation == M::dropout_seed_ignored ? 0x5eed : problem.dropout_seed) {}

  const double p;
  const Format format;
  const Variant& v;
  const bool narrow = is_narrow(format);
  const bool on = p > 0;
  const bool before_softmax = on && v.mutation == M::dropout_before_softmax, on_output = on && v.mutation == M::dropout_on_output,
             on_weights = on && !before_softmax && !on_output;
  const A kept_factor = A(kept_factor_as_read(p, v));
  const uint64_t seed;  // the stream: the problem's, or the mutant's own
  const double rate = v.mutation == M::dropout_p_swapped ? 1 - p : p;
  const A factor_in_format = narrow ? A(round_to(format, dropout_rescale(p))) : kept_factor;

  // Whether weight (b, h, i, j) survives (the shared-mask mutant: head (0, 0)'s draws).
  bool keeps(const Shape& s, int64_t b, int64_t h, int64_t i, int64_t j) const {
    const bool shared = v.mutation == M::dropout_mask_shared_across_heads;
    return philox_keeps(seed, rate, uint64_t(s.scores_at(shared ? 0 : b, shared ? 0 : h, i) + j));
  }
  // Whether the mutant's output element at [B,H,Tq,dv] index n survives: its own draws.
  bool keeps_output(int64_t n) const { return philox_keeps(seed, rate, uint64_t(n)); }
  // A kept normalized weight, rescaled the variant's way (Variant: dropout_divides, dropout_factor_in_format).
  A rescaled(A w) const {
    if (v.dropout_divides) return w / A(1 - p);
    if (v.dropout_factor_in_format && narrow) return A(round_to(format, double(w * factor_in_format)));
    return w * kept_factor;
  }
};

// The variant's attention of one problem: Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], bias
// [B,H,Tq,Tk] in; out [B,H,Tq,dv], lse [B,H,Tq] and keep [B,H,Tq,Tk] out. What the variant reads
// (scale, masks, tiles, dropout) is fixed per call; head() and row() then walk the problem.
template <class T, class A>
struct Kernel {
  Kernel(const Problem<T>& problem, T* out_, T* lse_, uint8_t* keep_, const Variant& variant)
      : p(problem), v(variant), out(out_), lse(lse_), keep(keep_) {}

  const Problem<T>& p;
  const Variant& v;
  T* const out;
  T* const lse;
  uint8_t* const keep;
  const Shape& s = p.shape;
  static constexpr A minus_inf = -std::numeric_limits<A>::infinity();
  const A scale = A(scale_as_read(p, v));
  const MasksAsRead<T> read{p, v};
  const Causal causal = read.masks.causal;
  const double sentinel = forbidden_score(v.mutation);
  // The dims of q.k: all dk, or the wide-head mutant's whole chunks of 32 (triton 621).
  const int64_t dims = v.mutation == M::head_dim_tail_dropped && s.dk > 64 ? s.dk / 32 * 32 : s.dk;
  // The tiles: key tiles of `width` keys (one tile of all keys in the two-pass form), query tiles of
  // `rows` queries, split-KV chunks from split_from keys on.
  const int64_t width = v.block > 0 ? v.block : s.Tk;
  const int64_t rows = v.query_tile > 0 ? v.query_tile : s.Tq;
  const bool split = v.block > 0 && v.split_from > 0 && v.split_chunk > 0 && s.Tk >= v.split_from;
  const bool fp16_normalizer = v.mutation == M::running_sum_fp16_long_context && s.Tk > 1024;
  // In f16 and bf16: the weights rounded to the format before the P V product (round_weights), and
  // every output rounded to it once.
  const bool narrow = is_narrow(p.format), round_p = narrow && v.round_weights;

  const DropoutAsRead<A> dropout{p, v};

  // The soft-cap. The cap-after-mask mutant masks before capping (flash-attention 1025): a masked
  // key scores cap(-inf) + bias_ij = -cap + bias_ij, and only a bias of -inf forbids.
  const A cap = A(p.softcap);
  const bool mask_before_cap = v.mutation == M::softcap_after_mask && p.softcap != 0;

  // Per (b, h) and query row: the draws [Tk], scores [Tk] (-inf where forbidden), e, weights and
  // terms [Tk], a tile's weighted sums of values [dv]; the row's online softmax and one split-KV
  // chunk's; the row's keys that carry weight, keys[0, n) in position order.
  std::vector<uint8_t> keep_row = std::vector<uint8_t>(size_t(s.Tk), 1);
  std::vector<A> score_row = std::vector<A>(size_t(s.Tk)), e = score_row, weights = score_row, terms = score_row;
  std::vector<A> sums = std::vector<A>(size_t(s.dv));
  Running<A> total{s.dv}, part{s.dv};
  std::vector<int64_t> keys;
  int64_t n = 0;
  // The (b, h) being computed, and kv_h = g G, the first query head of the KV group g it reads (k_at
  // and v_at map a query head to its KV head).
  int64_t b = 0, h = 0, kv_h = 0;

  T stored(A x) const { return T(narrow ? A(round_to(p.format, double(x))) : x); }
  A weight_in_format(A w) const { return round_p ? A(round_to(p.format, double(w))) : w; }
  A v_jc(int64_t j, int64_t col) const { return A(p.v[s.v_at(b, kv_h, j) + col]); }

  void run();
  void head(int64_t b_, int64_t h_);
  int64_t keys_visited(int64_t i0, int64_t i1) const;
  void row(int64_t i, int64_t key_end);
  void draw_keep_row(int64_t i);
  A capped(A x) const;
  A q_dot_k(int64_t i, int64_t j) const;
  void scores(int64_t i, int64_t key_end, A* score_i) const;
  bool weighted_keys(int64_t key_end);
  A sink_as_read() const;
  A fold_sink(A sink);
  void empty_row(int64_t i, int64_t key_end, T* out_i, A sink) const;
  void weighted_sums(const A* x, int64_t start, int64_t stop);
  void online(Running<A>& r, int64_t lo, int64_t hi, int64_t& start);
  void merge(Running<A>& into, const Running<A>& chunk) const;
  void softmax(int64_t key_end);
  void normalize(T* out_i, A l, A inv_l);
  void softmax_over_queries();
};

// Every (b, h), then the mutants that spoil one element of out [B,H,Tq,dv].
template <class T, class A>
void Kernel<T, A>::run() {
  for (int64_t b_ = 0; b_ < s.B; ++b_)
    for (int64_t h_ = 0; h_ < s.H; ++h_) head(b_, h_);
  if (v.mutation == M::element_off_1e3) out[0] = T(out[0] * (1 + 1e-3));
  if (v.mutation == M::nan_element) out[0] = std::numeric_limits<T>::quiet_NaN();
}

// Query head h of batch b: its rows [Tq] of out, by query tiles, each visiting its keys.
template <class T, class A>
void Kernel<T, A>::head(int64_t b_, int64_t h_) {
  b = b_;
  h = h_;
  kv_h = kv_group_as_read(s, h, v) * (s.H / s.kv_heads());
  if (v.mutation == M::softmax_over_queries) return softmax_over_queries();
  for (int64_t i0 = 0; i0 < s.Tq; i0 += rows) {
    const int64_t i1 = std::min(s.Tq, i0 + rows), key_end = keys_visited(i0, i1);
    for (int64_t i = i0; i < i1; ++i) row(i, key_end);
  }
}

// The keys query tile [i0, i1) visits: [0, the returned end), in whole key tiles. Under a causal
// mask with query tiles, no key past the last one its last row may see, j <= (i1 - 1) + offset
// (offset 0 upper-left, Tk - Tq lower-right and KV-end): the key tiles beyond are skipped.
template <class T, class A>
int64_t Kernel<T, A>::keys_visited(int64_t i0, int64_t i1) const {
  int64_t tiles = ceil_div(s.Tk, width);
  if (v.mutation == M::last_partial_key_tile_dropped && s.Tk > width) tiles = s.Tk / width;  // jax 27224
  if (v.query_tile > 0 && causal != Causal::none) {
    // KV-end's diagonal is at most the lower-right one (a key length <= Tk): its tiles are within these.
    const int64_t offset = causal == Causal::lower_right || causal == Causal::kv_end ? s.Tk - s.Tq : 0;
    const int64_t last_tile = v.mutation == M::causal_tiles_assume_equal_size
                                  ? i0 / rows + ceil_div(offset, width)  // query tile t as key tile t
                                  : floor_div(i1 - 1 + offset, width);   // the tile of the last key seen
    tiles = std::clamp<int64_t>(last_tile + 1, 0, tiles);
  }
  return std::min(s.Tk, tiles * width);
}

// Row i of out [dv] and lse from keys [0, key_end): the draws, the scores, the softmax, the
// normalized weighted sum of values, the output's dropout.
template <class T, class A>
void Kernel<T, A>::row(int64_t i, int64_t key_end) {
  T* out_i = out + s.out_at(b, h, i);
  draw_keep_row(i);
  scores(i, key_end, score_row.data());
  const A sink = sink_as_read();
  if (!weighted_keys(key_end)) return empty_row(i, key_end, out_i, sink);
  softmax(key_end);
  const A keys_lse = total.m + std::log(total.l);  // the keys' alone, before the sink joins
  const A sink_term = fold_sink(sink);
  const A l = total.l, inv_l = A(1) / l;
  if (v.mutation == M::nan_row_zeroed && !(l > 0)) {  // the guard meant for empty rows
    std::fill_n(out_i, s.dv, T(0));
    if (lse) lse[s.lse_at(b, h, i)] = -std::numeric_limits<T>::infinity();
    return;
  }
  if (lse)
    lse[s.lse_at(b, h, i)] = T(v.mutation == M::lse_max_left_out   ? std::log(l)
                               : v.mutation == M::lse_without_sink ? keys_lse
                                                                   : total.m + std::log(l));
  normalize(out_i, l, inv_l);
  for (int64_t col = 0; v.mutation == M::sink_given_a_value && col < s.dv; ++col)  // its weight times a value of 1
    out_i[col] = stored(A(out_i[col]) + sink_term / l);
  for (int64_t col = 0; dropout.on_output && col < s.dv; ++col)  // the output's own draws, at its [B,H,Tq,dv] index
    out_i[col] = dropout.keeps_output(s.out_at(b, h, i) + col) ? stored(A(out_i[col]) * dropout.kept_factor) : T(0);
}

// The row's dropout draws keep_row [Tk], written to keep [B,H,Tq,Tk] (the mutant leaves a forbidden
// key's unwritten).
template <class T, class A>
void Kernel<T, A>::draw_keep_row(int64_t i) {
  for (int64_t j = 0; dropout.on && j < s.Tk; ++j) {
    keep_row[size_t(j)] = dropout.keeps(s, b, h, i, j);
    const bool unwritten = v.mutation == M::keep_mask_unwritten_at_forbidden_keys && read.masked(b, i, j);
    if (keep && !unwritten) keep[s.scores_at(b, h, i) + j] = keep_row[size_t(j)];
  }
}

// The soft-cap: cap tanh(x / cap), or the mutant's x tanh(x) (flash-attention 2402) or x (sglang
// 33915); x when there is none.
template <class T, class A>
A Kernel<T, A>::capped(A x) const {
  if (p.softcap == 0 || v.mutation == M::softcap_ignored) return x;
  return v.mutation == M::softcap_s_tanh_s ? x * std::tanh(x) : cap * std::tanh(x / cap);
}

// q_i . k_j over the variant's dims (q_i [dk], k_j [dk] of the KV head read); (c q_i) . k_j when
// prescaled; by fused multiply-adds or not.
template <class T, class A>
A Kernel<T, A>::q_dot_k(int64_t i, int64_t j) const {
  const T* q_i = p.q + s.q_at(b, h, i);
  const T* k_j = p.k + s.k_at(b, kv_h, j);
  A dot = 0;
  for (int64_t k = 0; k < dims; ++k) {
    const A q = v.prescale ? A(scale * A(q_i[k])) : A(q_i[k]);
    dot = v.fma ? std::fma(q, A(k_j[k]), dot) : dot + q * A(k_j[k]);
  }
  return dot;
}

// Scores of row i for keys [0, key_end), score_i [key_end]: s_ij = cap(scale q_i . k_j) + bias_ij,
// -inf where forbidden (or the mutant's sentinel).
template <class T, class A>
void Kernel<T, A>::scores(int64_t i, int64_t key_end, A* score_i) const {
  for (int64_t j = 0; j < key_end; ++j) {
    const bool masked = read.masked(b, i, j);
    const bool bias_forbids = p.bias && p.bias[s.scores_at(b, h, i) + j] == minus_inf;
    if (bias_forbids || (masked && !mask_before_cap)) {
      score_i[j] = std::isnan(sentinel) ? minus_inf : A(sentinel);
      continue;
    }
    A dot = q_dot_k(i, j);
    if (v.mutation == M::scores_fp16) dot = to<Half>(dot);  // pytorch 60939
    score_i[j] = capped(masked ? minus_inf : v.prescale ? dot : scale * dot);
    if (p.bias) score_i[j] += A(p.bias[s.scores_at(b, h, i) + j]);
    if (v.mutation == M::scores_in_format && is_narrow(p.format)) score_i[j] = A(round_to(p.format, double(score_i[j])));
    if (dropout.before_softmax && !keep_row[size_t(j)]) score_i[j] = minus_inf;
  }
}

// The keys of [0, key_end) that carry weight, keys[0, n) (or, for the multiply-forbidden mutant,
// every visited key); whether any does.
template <class T, class A>
bool Kernel<T, A>::weighted_keys(int64_t key_end) {
  const A* score_i = score_row.data();
  keys.clear();
  bool any_weight = false;
  for (int64_t j = 0; j < key_end; ++j) {
    any_weight |= score_i[j] != minus_inf;
    if (score_i[j] != minus_inf || v.mutation == M::multiply_forbidden_values) keys.push_back(j);
  }
  n = int64_t(keys.size());
  return any_weight;
}

// Head h's sink as the variant reads it (contract.hpp), -inf for none: the contract's sinks[h], or
// the mutants' none (or none for one query), head 0's, or the sink times the scale.
template <class T, class A>
A Kernel<T, A>::sink_as_read() const {
  if (!p.sinks || v.mutation == M::sink_ignored || (v.mutation == M::sink_ignored_in_decode && s.Tq == 1)) return minus_inf;
  const A sink = A(p.sinks[v.mutation == M::one_sink_for_all_heads ? 0 : h]);
  return v.mutation == M::sink_scaled ? sink * scale : sink;
}

// The sink joins the row's softmax after its keys, as FlashAttention's learnable_sink does: the
// maximum m' = max(m, sink), l and acc [dv] (and the two-pass form's e_t) rescaled by exp(m - m'),
// l gaining exp(sink - m'). Returns that term, 0 without a sink.
template <class T, class A>
A Kernel<T, A>::fold_sink(A sink) {
  if (!(sink > minus_inf)) return A(0);
  const A m = std::isnan(total.m) ? total.m : std::max(total.m, sink);
  const A rescale = exp_shifted(total.m, m, v), term = exp_shifted(sink, m, v);
  total.l = total.l * rescale + term;
  for (A& x : total.acc) x *= rescale;
  for (int64_t t = 0; t < n; ++t) e[t] *= rescale;
  total.m = m;
  return term;
}

// A row with no key of weight: out_i [dv] 0 and lse -inf, or NaN (the contract's choice, or the
// mutant's). With a sink the row is not empty: out 0 and lse the sink (the sink mutants' own).
template <class T, class A>
void Kernel<T, A>::empty_row(int64_t i, int64_t key_end, T* out_i, A sink) const {
  if (sink > minus_inf || (p.sinks && v.mutation == M::sink_minus_inf_empty_row_nan)) {
    const bool nan = !(sink > minus_inf);  // the mutant's exp(-inf - -inf)
    const A value = nan ? std::numeric_limits<A>::quiet_NaN() : A(v.mutation == M::sink_given_a_value ? 1 : 0);
    std::fill_n(out_i, s.dv, T(value));
    if (lse) lse[s.lse_at(b, h, i)] = T(nan ? value : v.mutation == M::lse_without_sink ? minus_inf : sink);
    return;
  }
  bool nan = p.empty_rows == EmptyRows::nan || v.mutation == M::empty_row_nan;
  if (v.mutation == M::max_minus_infinity_nan)  // a row the masks leave keys: not "empty" to it
    for (int64_t j = 0; j < key_end; ++j)
      nan |= permits(p.masks, s, b, i, j) && !(p.bias && p.bias[s.scores_at(b, h, i) + j] == minus_inf);
  for (int64_t col = 0; col < s.dv; ++col) out_i[col] = nan ? std::numeric_limits<T>::quiet_NaN() : T(0);
  if (lse)
    lse[s.lse_at(b, h, i)] = nan                                   ? std::numeric_limits<T>::quiet_NaN()
                             : v.mutation == M::lse_empty_row_zero ? T(0)
                                                                   : -std::numeric_limits<T>::infinity();
}

// sums_c = sum_t x_t v_tc over t in [start, stop) (key keys[t]), for every column c (x [Tk], sums
// [dv]): pairwise per column, or left to right, walking V's rows in order (the same sums, sooner).
template <class T, class A>
void Kernel<T, A>::weighted_sums(const A* x, int64_t start, int64_t stop) {
  if (v.pairwise) {
    for (int64_t col = 0; col < s.dv; ++col) {
      for (int64_t t = start; t < stop; ++t) terms[t] = x[t] * v_jc(keys[t], col);
      sums[col] = sum(terms.data() + start, stop - start, true);
    }
    return;
  }
  std::fill(sums.begin(), sums.end(), A(0));
  for (int64_t t = start; t < stop; ++t) {
    const T* v_t = p.v + s.v_at(b, kv_h, keys[t]);
    for (int64_t col = 0; col < s.dv; ++col) sums[col] += x[t] * A(v_t[col]);
  }
}

// The online softmax update, one key tile at a time: r (acc [dv]) absorbs the keys of the tiles of
// positions [lo, hi), keys[start, ...) on, and start moves past them. The softmax numerators
// e_t = exp(s_t - m_new) against the running maximum, then l = l exp(m - m_new) + sum_t e_t
// and acc_c = acc_c exp(m - m_new) + sum_t e_t v_tc. A tile with no key that carries weight
// is skipped, as a correct tiled kernel must.
template <class T, class A>
void Kernel<T, A>::online(Running<A>& r, int64_t lo, int64_t hi, int64_t& start) {
  const A* score_i = score_row.data();
  for (int64_t position = lo; position < hi; position += width) {
    const int64_t tile_end = std::min(position + width, hi);
    int64_t stop = start;
    while (stop < n && keys[stop] < tile_end) ++stop;
    A m_new = r.m;
    for (int64_t t = start; t < stop; ++t)
      if (score_i[keys[t]] > m_new || std::isnan(score_i[keys[t]])) m_new = std::isnan(m_new) ? m_new : score_i[keys[t]];
    if (m_new == minus_inf) {
      if (v.mutation == M::online_max_clamped) r.m = 0;  // flash-attention issue 2082
      start = stop;
      continue;
    }
    if (v.mutation == M::naive_softmax) m_new = 0;
    const A rescale = r.m == minus_inf ? A(0) : exp_shifted(r.m, m_new, v);
    for (int64_t t = start; t < stop; ++t) {
      e[t] = exp_shifted(score_i[keys[t]], m_new, v);
      if (v.mutation == M::softmax_bf16) e[t] = to<BFloat16>(e[t]);
    }
    r.l = r.l * rescale + sum(e.data() + start, stop - start, v.pairwise);
    if (fp16_normalizer) r.l = to<Half>(r.l);  // llama.cpp 13975
    if (v.mutation == M::softmax_bf16) r.l = to<BFloat16>(r.l);
    const A acc_rescale = v.mutation == M::online_no_rescale && r.m != minus_inf ? A(1) : rescale;
    // FlashAttention rounds P to the input format for the P V product, after summing l, and
    // drops its entries there (the factor 1 / (1 - p) comes at the end).
    if (v.block > 0 || v.defer_normalize)
      for (int64_t t = start; t < stop; ++t)
        e[t] = dropout.on_weights && !keep_row[size_t(keys[t])] ? A(0) : weight_in_format(e[t]);
    weighted_sums(e.data(), start, stop);
    for (int64_t col = 0; col < s.dv; ++col) {
      r.acc[col] = r.acc[col] * acc_rescale + sums[col];
      if (v.mutation == M::output_accumulator_fp16) r.acc[col] = to<Half>(r.acc[col]);  // llama.cpp 13975
    }
    r.m = m_new;
    start = stop;
  }
}

// The split-KV merge: the partial (m_s, l_s, acc_s) of one chunk joins the total, both rescaled
// to the larger maximum m: l = l exp(m_total - m) + l_s exp(m_s - m), and acc [dv] alike. An empty
// chunk (no key with weight, m_s = -inf) adds nothing, and no exp(-inf - -inf) is taken.
template <class T, class A>
void Kernel<T, A>::merge(Running<A>& into, const Running<A>& chunk) const {
  if (chunk.m == minus_inf) return;
  const A m = std::isnan(chunk.m) ? chunk.m : std::max(into.m, chunk.m);
  A to_total = into.m == minus_inf ? A(0) : exp_shifted(into.m, m, v), to_chunk = exp_shifted(chunk.m, m, v);
  if (v.mutation == M::split_kv_merge_unscaled) to_total = to_chunk = 1;  // flashinfer 50, 58
  into.l = into.l * to_total + chunk.l * to_chunk;
  for (int64_t col = 0; col < s.dv; ++col) into.acc[col] = into.acc[col] * to_total + chunk.acc[col] * to_chunk;
  into.m = m;
}

// The row's softmax over keys [0, key_end) into total: online over the key tiles (one tile:
// two-pass), or split-KV: each chunk of split_chunk keys its own online pass from an empty state,
// the partials then merged.
template <class T, class A>
void Kernel<T, A>::softmax(int64_t key_end) {
  total.reset();
  int64_t start = 0;
  if (!split) return online(total, 0, key_end, start);
  for (int64_t lo = 0; lo < key_end; lo += v.split_chunk) {
    part.reset();
    online(part, lo, std::min(key_end, lo + v.split_chunk), start);
    merge(total, part);
  }
}

// Normalize into out_i [dv]: in the two-pass form the weights w_t = e_t / l first (rounded,
// dropped and rescaled the variant's way), then their weighted sum of values; otherwise acc / l.
template <class T, class A>
void Kernel<T, A>::normalize(T* out_i, A l, A inv_l) {
  if (v.block == 0 && !v.defer_normalize) {  // e_t are then exp(s_t - m)
    for (int64_t t = 0; t < n; ++t) {
      weights[t] = v.reciprocal ? e[t] * inv_l : e[t] / l;
      weights[t] = weight_in_format(weights[t]);
      if (v.mutation == M::bf16_weights) weights[t] = to<BFloat16>(weights[t]);
      if (dropout.on_weights) weights[t] = keep_row[size_t(keys[t])] ? dropout.rescaled(weights[t]) : A(0);
    }
    weighted_sums(weights.data(), 0, n);
    for (int64_t col = 0; col < s.dv; ++col) out_i[col] = stored(sums[col]);
    return;
  }
  const A factor = dropout.on_weights ? dropout.kept_factor : A(1);
  for (int64_t col = 0; col < s.dv; ++col)
    out_i[col] = stored((v.reciprocal ? total.acc[col] * inv_l : total.acc[col] / l) * factor);
}

// The wrong axis: a stable softmax down each column of the scores [Tq,Tk], then out [Tq,dv] of
// head (b, h) their weighted sums of values.
template <class T, class A>
void Kernel<T, A>::softmax_over_queries() {
  std::vector<A> score_bh(size_t(s.Tq * s.Tk));  // scores [Tq,Tk], then the weights
  for (int64_t i = 0; i < s.Tq; ++i) scores(i, s.Tk, score_bh.data() + i * s.Tk);
  for (int64_t j = 0; j < s.Tk; ++j) {
    A m = minus_inf, l = 0;
    for (int64_t i = 0; i < s.Tq; ++i) m = std::max(m, score_bh[size_t(i * s.Tk + j)]);
    for (int64_t i = 0; i < s.Tq; ++i) l += std::exp(score_bh[size_t(i * s.Tk + j)] - m);
    for (int64_t i = 0; i < s.Tq; ++i) {
      A& w = score_bh[size_t(i * s.Tk + j)];
      w = m == minus_inf ? A(0) : std::exp(w - m) / l;
    }
  }
  for (int64_t i = 0; i < s.Tq; ++i)
    for (int64_t col = 0; col < s.dv; ++col) {
      A o = 0;
      for (int64_t j = 0; j < s.Tk; ++j)
        if (score_bh[size_t(i * s.Tk + j)] != 0) o += score_bh[size_t(i * s.Tk + j)] * v_jc(j, col);
      out[s.out_at(b, h, i) + col] = stored(o);
    }
}

template <class T, class A>
void run(const Problem<T>& p, T* out, T* lse, uint8_t* keep, const Variant& v) {
  Kernel<T, A>(p, out, lse, keep, v).run();
}

// The two tiled kernels, correct here and the home of the tile bugs (mutant, below).
// FlashAttention's online softmax over key tiles of 64 in query tiles of 128, and from 320 keys on
// flash-decoding's split-KV: chunks of 256 keys, each its own online pass, merged by their maxima;
// q pre-scaled, as the Triton tutorial's kernel does.
constexpr Variant kTiledSplitKv{
    .block = 64, .query_tile = 128, .split_from = 320, .split_chunk = 256, .prescale = true, .defer_normalize = true};
// A causal-aware kernel: query tiles of 64, key tiles of 32, key tiles past the causal limit never
// visited; exp2 with log2(e) folded in, a reciprocal normalization at the end.
constexpr Variant kTiledCausalSkipping{.block = 32, .query_tile = 64, .reciprocal = true, .exp2 = true, .defer_normalize = true};

}  // namespace

const std::vector<NamedVariant>& correct_variants() {
  static const std::vector<NamedVariant> all = {
      {"two_pass", {}},
      {"fma_pairwise_reciprocal", {.reciprocal = true, .pairwise = true, .fma = true}},
      {"double_accumulation", {.accumulate_double = true}},
      {"online_exp2_deferred", {.block = 3, .exp2 = true, .defer_normalize = true}},
      {"online_reciprocal_prescaled", {.block = 1, .reciprocal = true, .prescale = true}},
      {"blocked_pairwise", {.block = 8, .pairwise = true, .fma = true, .defer_normalize = true}},
      {"two_pass_flush_subnormals", {.flush_subnormals = true}},
      {"online_exp2_flush_subnormals", {.block = 3, .exp2 = true, .defer_normalize = true, .flush_subnormals = true}},
      {"prescaled_flush_subnormals", {.block = 1, .reciprocal = true, .prescale = true, .flush_subnormals = true}},
      {"tiled_split_kv", kTiledSplitKv},
      {"tiled_causal_skipping", kTiledCausalSkipping},
      // Low precision: FlashAttention's tiles with P rounded to f16 or bf16 for the P V product;
      // the two-pass form with its weights rounded so; K and V copied out per query head (GQA).
      {"tiled_rounded_weights",
       [] {
         Variant tiled = kTiledSplitKv;
         tiled.round_weights = true;
         return tiled;
       }()},
      {"two_pass_rounded_weights", {.round_weights = true}},
      {"expanded_kv_heads", {.expand_kv_heads = true}},
      // Dropout's other rescales: dividing by 1 - p; PyTorch 1.13's, weights and factor in the format.
      {"two_pass_dropout_divides", {.dropout_divides = true}},
      {"rounded_weights_dropout_in_format", {.round_weights = true, .dropout_factor_in_format = true}},
  };
  return all;
}

Variant mutant(Mutation mutation) {
  Variant kernel;  // the two-pass form
  switch (mutation) {
    case M::online_no_rescale:
    case M::online_max_clamped:
    case M::nan_row_zeroed:
      kernel = {.block = 4};
      break;
    case M::last_partial_key_tile_dropped:
      kernel = {.block = 128, .defer_normalize = true};
      break;
    case M::split_kv_merge_unscaled:
    case M::head_dim_tail_dropped:
    case M::decode_path_ignores_mask:
      kernel = kTiledSplitKv;
      break;
    case M::causal_tiles_assume_equal_size:
      kernel = kTiledCausalSkipping;
      break;
    case M::running_sum_fp16_long_context:
    case M::output_accumulator_fp16:
    case M::softmax_bf16:
      kernel = {.block = 1, .defer_normalize = true};
      break;
    default:
      break;
  }
  kernel.mutation = mutation;
  return kernel;
}

namespace {

// The pool row (contract.hpp's kv_row) a paged variant reads for key j of batch b, query head h of
// `width` (dk for K, dv for V): the contract's, or the paged mutants' (block index, table layout, the
// table ignored, V's block stride).
template <class T>
int64_t pool_offset(const Problem<T>& p, const Variant& v, int64_t b, int64_t h, int64_t j, int64_t width) {
  const Shape& s = p.shape;
  int64_t entry = b * s.BPS + j / s.BS;
  if (v.mutation == M::paged_block_index_off_by_one) entry = b * s.BPS + std::min((j + 1) / s.BS, s.BPS - 1);
  if (v.mutation == M::paged_table_transposed) entry = j / s.BS * s.B + b;  // [BPS][B]
  const int64_t named = v.mutation == M::paged_table_ignored ? entry % s.NB : p.block_table[entry];
  const int64_t block = (named * s.kv_heads() + s.kv_head(h)) * s.BS;
  const bool v_with_k_stride = v.mutation == M::paged_v_block_stride_of_k && width == s.dv;
  return v_with_k_stride ? (block * s.dk + j % s.BS * s.dv) % (s.v_size() - s.dv + 1) : (block + j % s.BS) * width;
}

// p's dense twin as the variant gathers it: k [B,H_kv,Tk,dk] and values [B,H_kv,Tk,dv] through the
// block table, and (the partial-last-block mutant) its key lengths rounded up to whole blocks.
template <class T>
Problem<T> gathered(const Problem<T>& p, const Variant& v, std::vector<T>& k, std::vector<T>& values,
                    std::vector<int32_t>& lengths) {
  Problem<T> dense = gathered_through(
      p, k, values, [&](int64_t b, int64_t h, int64_t j, int64_t width) { return pool_offset(p, v, b, h, j, width); });
  const Shape& s = dense.shape;
  if (v.mutation == M::paged_last_block_read_whole && p.masks.key_lengths) {
    const int64_t block = p.shape.BS;
    for (int64_t b = 0; b < s.B; ++b)
      lengths.push_back(int32_t(std::min(s.Tk, (p.masks.key_lengths[b] + block - 1) / block * block)));
    dense.masks.key_lengths = lengths.data();
  }
  return dense;
}

// p's sequences as the variant masks them over the packed rows (contract.hpp's unpacked_through): the
// contract's rule, or the varlen mutants' (a sequence's keys one past its end; the diagonal and window
// of the packed tensor).
template <class T>
Problem<T> unpacked(const Problem<T>& p, const Variant& v, std::vector<uint8_t>& allow) {
  return unpacked_through(p, allow, [&](int64_t b, int64_t r, int64_t c) {
    Sequence q = sequence(p, b);
    if (v.mutation == M::varlen_cu_seqlens_off_by_one) q.Tk = std::min(q.Tk + 1, p.shape.Tk - q.first_k);
    if (c < q.first_k || c >= q.first_k + q.Tk) return false;
    if (v.mutation == M::varlen_causal_at_packed_tensor) return sequence_permits(p, r, c, p.shape.Tq, p.shape.Tk);
    return sequence_permits(p, r - q.first_q, c - q.first_k, q.Tq, q.Tk);
  });
}

}  // namespace

template <class T>
void variant_attention(const Problem<T>& p, T* out, const Variant& v, T* lse, uint8_t* keep) {
  if (p.shape.varlen) {  // a dense kernel taking packed sequences: one batch under its own mask, then attention as ever
    std::vector<uint8_t> allow;
    variant_attention(unpacked(p, v, allow), out, v, lse, keep);
    return;
  }
  if (p.shape.paged()) {  // a dense kernel taking paged K and V: gathered first, then attention as ever
    std::vector<T> k, values;
    std::vector<int32_t> lengths;
    variant_attention(gathered(p, v, k, values, lengths), out, v, lse, keep);
    return;
  }
  if (v.expand_kv_heads && p.shape.kv_heads() < p.shape.H) {
    // K [B,H_kv,Tk,dk] and V [B,H_kv,Tk,dv] copied out to [B,H,Tk,dk] and [B,H,Tk,dv], query head h
    // getting its group's KV head, as torch's repeat_interleave does; then attention as if H_kv = H.
    const Shape& s = p.shape;
    Problem<T> expanded = p;
    expanded.shape.H_kv = 0;
    std::vector<T> k(size_t(expanded.shape.k_size())), values(size_t(expanded.shape.v_size()));
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.H; ++h) {
        std::copy_n(p.k + s.k_at(b, h, 0), s.Tk * s.dk, k.begin() + expanded.shape.k_at(b, h, 0));
        std::copy_n(p.v + s.v_at(b, h, 0), s.Tk * s.dv, values.begin() + expanded.shape.v_at(b, h, 0));
      }
    expanded.k = k.data();
    expanded.v = values.data();
    Variant rest = v;
    rest.expand_kv_heads = false;
    variant_attention(expanded, out, rest, lse, keep);
    return;
  }
#ifdef __SSE__
  const unsigned saved = _mm_getcsr();
  if (v.flush_subnormals) _mm_setcsr(saved | kFlushToZero | kDenormalsAreZero);
#endif
  if (v.accumulate_double)
    run<T, double>(p, out, lse, keep, v);
  else if (v.mutation == M::double_in_float)
    run<T, float>(p, out, lse, keep, v);
  else
    run<T, T>(p, out, lse, keep, v);
#ifdef __SSE__
  _mm_setcsr(saved);  // the mode is the call's own, as a well-behaved kernel keeps it
#endif
}

template void variant_attention(const Problem<float>&, float*, const Variant&, float*, uint8_t*);
template void variant_attention(const Problem<double>&, double*, const Variant&, double*, uint8_t*);

}  // namespace attncheck
