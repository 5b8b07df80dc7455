// The multi-head attention layer around attention (docs/contract.md, "The layer"): queries, keys
// and values are learned linear maps of the inputs, split into heads by columns, attended per head,
// merged and projected:
//   Q = x_q w_q + b_q, K = x_kv w_k + b_k, V = x_kv w_v + b_v;
//   head_h = softmax(scale Q_h K_g^T, over the permitted keys) V_g, g = h / (H / H_kv);
//   out = concat_h(head_h) w_o + b_o.
// A missing bias is zero (D2L's bias-free maps).
#pragma once

#include <cstdint>
#include <string>

#include "attncheck/contract.hpp"

namespace attncheck {

// The shape vocabulary again, with D, the model width. heads is the attention inside: B, H, H_kv,
// Tq, Tk, dk, dv. Buffers (row-major): x_q [B,Tq,D], x_kv [B,Tk,D], w_q [D,H dk], w_k [D,H_kv dk],
// w_v [D,H_kv dv], b_q [H dk], b_k [H_kv dk], b_v [H_kv dv], w_o [H dv,D], b_o [D], out [B,Tq,D],
// weights [B,H,Tq,Tk] (heads' scores_at). Head h is columns h dk .. h dk + dk - 1 of Q (q_col),
// its KV head's are K's and V's (k_col, v_col), and its output is rows h dv .. of w_o (merged_col).
struct LayerShape {
  Shape heads;
  int64_t D = 1;

  int64_t x_q_at(int64_t b, int64_t i) const { return (b * heads.Tq + i) * D; }
  int64_t x_kv_at(int64_t b, int64_t j) const { return (b * heads.Tk + j) * D; }
  int64_t out_at(int64_t b, int64_t i) const { return x_q_at(b, i); }
  int64_t q_col(int64_t h) const { return h * heads.dk; }
  int64_t k_col(int64_t h) const { return heads.kv_head(h) * heads.dk; }
  int64_t v_col(int64_t h) const { return heads.kv_head(h) * heads.dv; }
  int64_t merged_col(int64_t h) const { return h * heads.dv; }

  int64_t q_width() const { return heads.H * heads.dk; }           // columns of w_q, b_q's length
  int64_t k_width() const { return heads.kv_heads() * heads.dk; }  // of w_k, b_k
  int64_t v_width() const { return heads.kv_heads() * heads.dv; }  // of w_v, b_v
  int64_t merged_width() const { return heads.H * heads.dv; }      // rows of w_o
  int64_t x_q_size() const { return heads.B * heads.Tq * D; }
  int64_t x_kv_size() const { return heads.B * heads.Tk * D; }
  int64_t out_size() const { return x_q_size(); }
};

// One layer problem. The masks, scale, empty-row policy and format are the attention's (Problem).
template <class T>
struct Layer {
  LayerShape shape;
  const T* x_q = nullptr;                                  // [B,Tq,D]
  const T* x_kv = nullptr;                                 // [B,Tk,D]; the same pointer as x_q for self-attention (Tk = Tq)
  const T *w_q = nullptr, *w_k = nullptr, *w_v = nullptr;  // [D,H dk], [D,H_kv dk], [D,H_kv dv]
  const T *b_q = nullptr, *b_k = nullptr, *b_v = nullptr;  // [H dk], [H_kv dk], [H_kv dv], or null
  const T* w_o = nullptr;                                  // [H dv,D]
  const T* b_o = nullptr;                                  // [D] or null
  Masks masks;
  double scale = 0;  // 0 = 1/sqrt(dk)
  EmptyRows empty_rows = EmptyRows::zero;
  Format format = Precision<T>::format;  // T's, or f16 or bf16 over float holding every input exactly
};

// Where the layer's results go.
template <class T>
struct LayerResult {
  T* out = nullptr;      // [B,Tq,D]
  T* weights = nullptr;  // [B,H,Tq,Tk], each head's attention weights; null = not wanted
};

// Empty when the layer is well formed, else a one-line reason: the attention's shape, masks,
// scale and format as problem_error checks them, D out of range, a missing buffer, a self-attention
// layer whose Tk is not Tq, a value its format cannot hold.
template <class T>
std::string layer_error(const Layer<T>& layer, const LayerResult<T>& result);

}  // namespace attncheck
