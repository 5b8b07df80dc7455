// Between the C++ contract (contract.hpp) and plugin ABIs v1 and v2 (plugin.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attncheck/contract.hpp"
#include "attncheck/features.hpp"
#include "attncheck/layer.hpp"
#include "attncheck/plugin.h"

namespace attncheck {

// The ABI view of `problem` writing out [B,H,Tq,dv]; ABI v1 carries no bias and only the zero
// empty-row policy. Key lengths fold into an allow mask [B,Tq,Tk] built in `allow_storage`, which
// must outlive the view.
template <class T>
attncheck_problem to_abi(const Problem<T>& problem, T* out, std::vector<uint8_t>& allow_storage);

// The C++ view of an ABI problem, the output pointer aside (p.out).
template <class T>
Problem<T> from_abi(const attncheck_problem& p);

// Whether an ABI dtype names a format and `capabilities` claim it.
inline bool claims_dtype(uint32_t capabilities, int32_t dtype) {
  return dtype >= ATTNCHECK_F32 && dtype <= ATTNCHECK_BF16 && (capabilities & capability_of(Format(dtype)));
}

// q, k, v and bias of a problem in a 2-byte format as bit patterns, and out [B,H,Tq,dv] as the
// kernel writes it in that format: what ABI v2 carries for ATTNCHECK_F16 and ATTNCHECK_BF16.
// Empty for a problem in T's own format.
struct NarrowBuffers {
  std::vector<uint16_t> q, k, v, bias, out;
};

// The ABI v2 view of `problem` writing out [B,H,Tq,dv] and, when not null, lse [B,H,Tq] (float
// for every format but f64). v2 has no empty-row policy but zero. A problem in f16 or bf16 has its
// inputs written into `narrow`, and the kernel's out goes there: widen_output brings it back.
// With dropout, the kernel writes the keep mask it used into `keep` [B,H,Tq,Tk] when not null.
template <class T>
attncheck_problem_v2 to_abi_v2(const Problem<T>& problem, T* out, T* lse, NarrowBuffers& narrow, uint8_t* keep = nullptr);

// The size of an attncheck_problem_v2 before the dropout fields were appended: the smallest a
// plugin accepts. A problem that ends there carries no dropout.
inline constexpr int32_t kProblemV2SizeBeforeDropout = int32_t(offsetof(attncheck_problem_v2, dropout_p));
inline bool carries_dropout(const attncheck_problem_v2& p) {
  return p.size >= int32_t(offsetof(attncheck_problem_v2, dropout_keep) + sizeof p.dropout_keep);
}

// After the call, out [B,H,Tq,dv] from narrow.out, exactly (float holds every f16 and bf16 value);
// nothing to do for a problem in T's own format.
template <class T>
void widen_output(const Problem<T>& problem, const NarrowBuffers& narrow, T* out);

// Float buffers holding an f16 or bf16 problem's q, k, v and bias, and the float out a C++
// implementation writes before narrow_output rounds it into the ABI's out.
struct WideBuffers {
  std::vector<float> q, k, v, bias, out;
};

// The C++ view of an ABI v2 problem, its buffers read as T's, the output pointers aside.
template <class T>
Problem<T> from_abi_v2(const attncheck_problem_v2& p);

// For an ABI problem in f16 or bf16 whose float view (from_abi_v2<float>) problem_error passed:
// its inputs widened into `wide`, the view pointed at them, its format set, wide.out made.
void widen_inputs(const attncheck_problem_v2& p, Problem<float>& problem, WideBuffers& wide);

// After the computation, p.out [B,H,Tq,dv] in p's 2-byte format from wide.out, rounded to nearest.
void narrow_output(const attncheck_problem_v2& p, const WideBuffers& wide);

// The backward's own buffers in a 2-byte format: the given out [B,H,Tq,dv] and dout [B,H,Tq,dv]
// as bit patterns, and dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv] as the kernel writes
// them. Empty for a problem in T's own format.
struct NarrowGrads {
  std::vector<uint16_t> out, dout, dq, dk, dv;
};

// The ABI v2 view of the backward of `problem`: `forward` (filled here, with `narrow` as
// to_abi_v2's) carries the problem with the given out and lse as its out and lse, inputs now;
// the kernel's gradients go to grads' buffers, or for f16 and bf16 to `narrow_grads`, which
// widen_grads brings back.
template <class T>
attncheck_grads_v2 to_abi_grads(const Problem<T>& problem, const Grads<T>& grads, attncheck_problem_v2& forward,
                                NarrowBuffers& narrow, NarrowGrads& narrow_grads);
template <class T>
void widen_grads(const Problem<T>& problem, const NarrowGrads& narrow_grads, const Grads<T>& grads);

// A plugin's side: the float view of an f16 or bf16 backward (its problem already widened by
// widen_inputs): the given out and dout widened into `wide`, dq, dk and dv made there; and after
// the computation, the gradients rounded into the ABI's buffers.
struct WideGrads {
  std::vector<float> out, dout, dq, dk, dv;
};
Grads<float> widen_grads_inputs(const attncheck_grads_v2& g, const Problem<float>& problem, WideGrads& wide);
void narrow_grads(const attncheck_grads_v2& g, const WideGrads& wide);

// The layer (attncheck_mha_v2). Its ten inputs in ABI order (x_q, x_kv, w_q, w_k, w_v, b_q, b_k,
// b_v, w_o, b_o): each one's name, its pointer in Layer<T> and in the ABI, its element count
// (0 for an absent bias). The conversions below walk this table.
template <class T>
struct LayerInput {
  const char* name;
  const T* Layer<T>::*in_layer;
  const void* attncheck_mha_v2::*in_abi;
};
template <class T>
inline constexpr LayerInput<T> kLayerInputs[] = {
    {"x_q", &Layer<T>::x_q, &attncheck_mha_v2::x_q}, {"x_kv", &Layer<T>::x_kv, &attncheck_mha_v2::x_kv},
    {"w_q", &Layer<T>::w_q, &attncheck_mha_v2::w_q}, {"w_k", &Layer<T>::w_k, &attncheck_mha_v2::w_k},
    {"w_v", &Layer<T>::w_v, &attncheck_mha_v2::w_v}, {"b_q", &Layer<T>::b_q, &attncheck_mha_v2::b_q},
    {"b_k", &Layer<T>::b_k, &attncheck_mha_v2::b_k}, {"b_v", &Layer<T>::b_v, &attncheck_mha_v2::b_v},
    {"w_o", &Layer<T>::w_o, &attncheck_mha_v2::w_o}, {"b_o", &Layer<T>::b_o, &attncheck_mha_v2::b_o}};
inline constexpr int kLayerInputCount = 10;
// The element counts of the ten inputs, in that order.
void layer_input_sizes(const LayerShape& shape, int64_t (&sizes)[kLayerInputCount]);

// What a layer call carries, as the feature table reads it (CallView): its format, the attention's
// shape and masks, the layer, and whether each head's weights are asked.
template <class T>
CallView layer_call_view(const Layer<T>& layer, bool weights) {
  CallView call;
  call.format = layer.format;
  call.shape = layer.shape.heads;
  call.masks = layer.masks;
  call.layer = true;
  call.layer_weights = weights;
  call.scale = layer.scale;
  call.D = layer.shape.D;
  call.self_attention = layer.x_kv == layer.x_q;
  call.biases = (layer.b_q != nullptr) + (layer.b_k != nullptr) + (layer.b_v != nullptr) + (layer.b_o != nullptr);
  return call;
}

// A layer in f16 or bf16: its inputs as bit patterns (x_kv shares x_q's for self-attention), and
// out [B,Tq,D] as the kernel writes it. Empty for a layer in T's own format.
struct NarrowLayer {
  std::vector<uint16_t> inputs[kLayerInputCount], out;
};
// The ABI view of `layer` writing out [B,Tq,D] and, when not null, weights [B,H,Tq,Tk] (float, double
// for f64); widen_layer_output brings a 2-byte out back from `narrow`.
template <class T>
attncheck_mha_v2 to_abi_mha(const Layer<T>& layer, T* out, T* weights, NarrowLayer& narrow);
template <class T>
void widen_layer_output(const Layer<T>& layer, const NarrowLayer& narrow, T* out);
// The C++ view of an ABI layer, its buffers read as T's, the output pointers aside.
template <class T>
Layer<T> from_abi_mha(const attncheck_mha_v2& m);
// A plugin's side of an f16 or bf16 layer: its inputs widened into float, out made there, and after
// the computation out rounded into the ABI's.
struct WideLayer {
  std::vector<float> inputs[kLayerInputCount], out;
};
void widen_layer_inputs(const attncheck_mha_v2& m, Layer<float>& layer, WideLayer& wide);
void narrow_layer_output(const attncheck_mha_v2& m, const WideLayer& wide);

}  // namespace attncheck
