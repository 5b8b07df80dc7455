// The built-in multi-head attention layer (contract: layer.hpp): the projections, the heads split
// by columns, attention() per head, the heads merged and projected. Its steps are public so that
// impl/variants recombines them into the layer's correct variants and planted bugs.
#pragma once

#include <cstdint>
#include <vector>

#include "attncheck/layer.hpp"

namespace attncheck {

// y [rows,cols] = x [rows,D] w [D,cols] + b [cols] (b null: none), summed in T, then each element
// rounded to `format` (the projections a kernel stores in its format).
template <class T>
std::vector<T> project(const T* x, int64_t rows, int64_t D, const T* w, const T* b, int64_t cols, Format format);

// heads [B,n,length,d] of y [B,length,n d] (length Tq or Tk): head g is columns g d .. g d + d - 1. merge_heads is its inverse.
template <class T>
std::vector<T> split_heads(const std::vector<T>& y, int64_t B, int64_t length, int64_t n, int64_t d);
template <class T>
std::vector<T> merge_heads(const std::vector<T>& heads, int64_t B, int64_t length, int64_t n, int64_t d);

// The layer's attention on Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv]: its masks, scale,
// policy and format.
template <class T>
Problem<T> heads_problem(const Layer<T>& layer, const T* q, const T* k, const T* v);

// out [B,Tq,D] and, when asked, weights [B,H,Tq,Tk]. The layer must be well formed (layer_error empty).
template <class T>
void mha_forward(const Layer<T>& layer, const LayerResult<T>& result);

}  // namespace attncheck
