// Multi-head layers drawn from a stream of choices (cases.hpp's Chooser): the generator behind the
// layer's properties. Shapes small enough for the oracle's exact projections; D = H dk = H dv two
// times in three (the shape nn.MultiheadAttention and ONNX Runtime's Attention take), any head
// widths otherwise; self- and cross-attention; biases all, none or each by a coin; inputs standard
// normal, weights scaled by 1/sqrt(D) (or by 4/sqrt(D), peaked softmaxes); the masks the kernel
// claims, empty rows included.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attncheck/cases.hpp"
#include "attncheck/layer.hpp"

namespace attncheck {

// An owned layer: its buffers, and the Layer view of them.
template <class T>
struct LayerCase {
  LayerShape shape;
  bool self_attention = true;         // x_kv is x_q (and x_kv is empty)
  std::vector<T> x_q, x_kv;           // [B,Tq,D], [B,Tk,D]
  std::vector<T> w_q, w_k, w_v, w_o;  // [D,H dk], [D,H_kv dk], [D,H_kv dv], [H dv,D]
  std::vector<T> b_q, b_k, b_v, b_o;  // [H dk], [H_kv dk], [H_kv dv], [D]; empty = none
  std::vector<uint8_t> allow;         // [B,Tq,Tk] or empty
  std::vector<int32_t> key_lengths;   // [B] or empty
  Causal causal = Causal::none;
  int64_t window_left = -1, window_right = -1;
  double scale = 0;
  EmptyRows empty_rows = EmptyRows::zero;
  Format format = Precision<T>::format;
  std::string mix;  // what was drawn, for reports

  Layer<T> layer() const;
  bool permits(int64_t b, int64_t i, int64_t j) const { return attncheck::permits(layer().masks, shape.heads, b, i, j); }
  // The same layer as cross-attention: x_kv a copy of x_q.
  LayerCase as_cross_attention() const;
};

// A layer within `limits` (its capabilities: formats, masks, GQA; max_heads, max_len).
template <class T>
LayerCase<T> draw_layer_case(Chooser& choose, const CaseLimits& limits = {});

// The layer as a person reads it: shapes, biases, masks (each batch's grid), scale and format.
template <class T>
std::string describe(const LayerCase<T>& c);

}  // namespace attncheck
