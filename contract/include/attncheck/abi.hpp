// Between the C++ contract (contract.hpp) and plugin ABIs v1 and v2 (plugin.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attncheck/call_schema.hpp"
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

// A call in a 2-byte format (f16, bf16) as ABI v2 carries it: each slot in the call's format
// (call_schema.hpp) as bit patterns, and for each written one where its values go back (widen_outputs).
// Empty for a problem in T's own format.
struct NarrowBuffers {
  std::vector<uint16_t> bits[slot::kCount];
  void* values_to[slot::kCount] = {};
};

// The ABI v2 view of `problem` writing out [B,H,Tq,dv] and, when not null, lse [B,H,Tq] (float
// for every format but f64). v2 has no empty-row policy but zero. A problem in f16 or bf16 has its
// inputs written into `narrow`, and the kernel's out goes there: widen_outputs brings it back.
// With dropout, the kernel writes the keep mask it used into `keep` [B,H,Tq,Tk] when not null.
template <class T>
attncheck_problem_v2 to_abi_v2(const Problem<T>& problem, T* out, T* lse, NarrowBuffers& narrow, uint8_t* keep = nullptr);

// The size of an attncheck_problem_v2 before the dropout fields were appended: the smallest a
// plugin accepts. A problem that ends there carries no dropout.
inline constexpr int32_t kProblemV2SizeBeforeDropout = int32_t(offsetof(attncheck_problem_v2, dropout_p));
inline bool carries_dropout(const attncheck_problem_v2& p) {
  return p.size >= int32_t(offsetof(attncheck_problem_v2, dropout_keep) + sizeof p.dropout_keep);
}

// After the call, each written tensor from narrow's bits into the T's it goes back to, exactly
// (float holds every f16 and bf16 value); nothing to do in T's own format.
template <class T>
void widen_outputs(Format format, const NarrowBuffers& narrow);

// A plugin's side of a 2-byte call: each slot in the call's format as float values, inputs widened
// and outputs made (zeros) for the C++ implementation to write before they are rounded back.
struct WideBuffers {
  std::vector<float> values[slot::kCount];
};

// The C++ view of an ABI v2 problem, its buffers read as T's, the output pointers aside.
template <class T>
Problem<T> from_abi_v2(const attncheck_problem_v2& p);

// For an ABI problem in f16 or bf16 whose float view (from_abi_v2<float>) problem_error passed:
// its inputs widened into `wide`, the view pointed at them, its format set, out made in `wide`.
void widen_inputs(const attncheck_problem_v2& p, Problem<float>& problem, WideBuffers& wide);

// After the computation, p's written tensors (out) in p's 2-byte format from `wide`, rounded to nearest.
void narrow_output(const attncheck_problem_v2& p, const WideBuffers& wide);

// The ABI v2 view of the backward of `problem`: `forward` (filled here) carries the problem with
// the given out and lse as its out and lse, inputs now; the kernel's gradients go to grads'
// buffers, or for f16 and bf16 to `narrow`, which widen_outputs brings back.
template <class T>
attncheck_grads_v2 to_abi_grads(const Problem<T>& problem, const Grads<T>& grads, attncheck_problem_v2& forward,
                                NarrowBuffers& narrow);

// A plugin's side: the float view of an f16 or bf16 backward: its inputs (the problem's, out and
// dout) widened into `wide` and `problem` pointed at them, dq, dk and dv made there; and after the
// computation, the gradients rounded into the ABI's buffers.
Grads<float> widen_grads_inputs(const attncheck_grads_v2& g, Problem<float>& problem, WideBuffers& wide);
void narrow_grads(const attncheck_grads_v2& g, const WideBuffers& wide);

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

// The ABI view of `layer` writing out [B,Tq,D] and, when not null, weights [B,H,Tq,Tk] (float, double
// for f64); a layer in f16 or bf16 has its inputs written into `narrow`, and its out goes there:
// widen_outputs brings it back. Self-attention keeps x_kv the same pointer as x_q.
template <class T>
attncheck_mha_v2 to_abi_mha(const Layer<T>& layer, T* out, T* weights, NarrowBuffers& narrow);
// The C++ view of an ABI layer, its buffers read as T's, the output pointers aside.
template <class T>
Layer<T> from_abi_mha(const attncheck_mha_v2& m);
// A plugin's side of an f16 or bf16 layer: its inputs widened into float, out made there, and after
// the computation out rounded into the ABI's.
void widen_layer_inputs(const attncheck_mha_v2& m, Layer<float>& layer, WideBuffers& wide);
void narrow_layer_output(const attncheck_mha_v2& m, const WideBuffers& wide);

}  // namespace attncheck
