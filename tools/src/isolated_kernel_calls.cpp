#include <stdexcept>
#include <type_traits>
#include <vector>

#include "attncheck/abi.hpp"
#include "attncheck/features.hpp"
#include "attncheck/isolated_kernel.hpp"
#include "attncheck/plugin_loader.hpp"
#include "attncheck/protocol.hpp"

namespace attncheck {
using namespace protocol;

Outcome IsolatedKernel::exchange(AbiStructs& abi, CallKind kind, uint32_t features, uint32_t parts, const char* entry_point) {
  const Request request = request_of(abi, kind, features, parts);
  const void* inputs[kBuffers];
  void* outputs[kBuffers];
  buffers_of(abi, request, inputs, outputs);
  return exchange(request, inputs, outputs, entry_point);
}

template <class T>
Outcome IsolatedKernel::run(const Case<T>& c, std::vector<T>& out, std::vector<T>* lse, std::vector<uint8_t>* keep) {
  // c: Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], allow [B,Tq,Tk], key lengths [B], bias
  // [B,H,Tq,Tk]; out [B,H,Tq,dv] and, when asked, lse [B,H,Tq] and the dropout keep mask [B,H,Tq,Tk].
  if (child_ < 0 && !past_budget()) start();
  const Shape& s = c.shape;
  // A case that does not fill its shape, or uses what the plugin does not claim, is the harness's
  // fault: say so, never blame the kernel.
  if (int64_t(c.q.size()) != s.q_size() || int64_t(c.k.size()) != s.k_size() || int64_t(c.v.size()) != s.v_size())
    throw std::logic_error("a case whose tensors do not fit its shape");
  const Problem<T> problem = c.problem();
  const bool want_keep = keep && c.dropout_p > 0;
  const CallView call = call_view(problem, lse != nullptr, false, want_keep);
  require_sendable(call, capabilities_, domain_);  // a v1 plugin's: what ABI v1 carries
  out.resize(size_t(s.out_size()));
  if (lse) lse->resize(size_t(s.lse_size()));
  if (keep) keep->assign(want_keep ? size_t(s.scores_size()) : 0, kUnwrittenKeep);
  NarrowBuffers narrow;  // f16 and bf16 as bit patterns
  AbiStructs abi;
  abi.problem = to_abi_v2(problem, out.data(), lse ? lse->data() : nullptr, narrow, want_keep ? keep->data() : nullptr);
  const Outcome outcome =
      exchange(abi, CallKind::forward, features_used(call), 0, entry_point_name(version_, std::is_same_v<T, float>));
  widen_outputs<T>(problem.format, narrow);
  return outcome;
}

template <class T>
Outcome IsolatedKernel::run_backward(const Case<T>& c, const Grads<T>& grads) {
  // c as run's; grads: out, dout [B,H,Tq,dv] and lse [B,H,Tq] in, dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk]
  // and dv [B,H_kv,Tk,dv] out.
  if (child_ < 0 && !past_budget()) start();
  const Problem<T> problem = c.problem();
  const CallView call = call_view(problem, false, true);
  require_sendable(call, capabilities_, domain_);
  NarrowBuffers narrow;
  AbiStructs abi;
  abi.grads = to_abi_grads(problem, grads, abi.problem, narrow);
  const Outcome outcome = exchange(abi, CallKind::backward, features_used(call), 0, "attncheck_backward_v2");
  widen_outputs<T>(problem.format, narrow);
  return outcome;
}

template <class T>
Outcome IsolatedKernel::run_layer(const LayerCase<T>& c, std::vector<T>& out, std::vector<T>* weights) {
  // c: x_q [B,Tq,D], x_kv [B,Tk,D], the maps and biases (layer.hpp), allow [B,Tq,Tk], key lengths
  // [B]; out [B,Tq,D] and, when asked, weights [B,H,Tq,Tk].
  if (child_ < 0 && !past_budget()) start();
  const Layer<T> layer = c.layer();
  const Shape& h = c.shape.heads;
  const CallView call = layer_call_view(layer, weights != nullptr);
  require_sendable(call, capabilities_, domain_);
  out.resize(size_t(c.shape.out_size()));
  if (weights) weights->resize(size_t(h.scores_size()));
  NarrowBuffers narrow;
  AbiStructs abi;
  abi.layer = to_abi_mha(layer, out.data(), weights ? weights->data() : nullptr, narrow);
  // The parts: self-attention, and each bias the layer has.
  uint32_t parts = c.self_attention ? uint32_t(kSelf) : 0u;
  for (const Slot& s : kSlots)
    if (s.role(CallKind::layer) == Role::in_if && s.part && abi_pointer(abi.call(), CallKind::layer, s)) parts |= s.part;
  const Outcome outcome = exchange(abi, CallKind::layer, features_used(call), parts, "attncheck_mha_forward_v2");
  widen_outputs<T>(layer.format, narrow);
  return outcome;
}

template Outcome IsolatedKernel::run_layer(const LayerCase<float>&, std::vector<float>&, std::vector<float>*);
template Outcome IsolatedKernel::run_layer(const LayerCase<double>&, std::vector<double>&, std::vector<double>*);
template Outcome IsolatedKernel::run(const Case<float>&, std::vector<float>&, std::vector<float>*, std::vector<uint8_t>*);
template Outcome IsolatedKernel::run(const Case<double>&, std::vector<double>&, std::vector<double>*, std::vector<uint8_t>*);
template Outcome IsolatedKernel::run_backward(const Case<float>&, const Grads<float>&);
template Outcome IsolatedKernel::run_backward(const Case<double>&, const Grads<double>&);

}  // namespace attncheck
