#include <stdexcept>
#include <type_traits>
#include <vector>

#include "attncheck/abi.hpp"
#include "attncheck/features.hpp"
#include "attncheck/isolated_kernel.hpp"
#include "attncheck/plugin_loader.hpp"
#include "attncheck/protocol.hpp"

namespace attncheck {
namespace {

using namespace protocol;

// The PROB headers for case c (its problem's ABI view `abi`): the forward, or with `backward` the backward.
template <class T>
Request request_for(const Case<T>& c, const attncheck_problem_v2& abi, bool want_lse, bool backward, bool want_keep = false) {
  const Shape& s = c.shape;
  uint32_t flags = 0;
  const CallView call = call_view(c.problem(), want_lse, backward, want_keep);
  for (const Feature& f : features())
    if (f.used(call)) flags |= f.protocol_flag;
  return {{abi.dtype, flags, int32_t(s.B), int32_t(s.H), int32_t(s.kv_heads()), int32_t(s.Tq), int32_t(s.Tk), int32_t(s.dk),
           int32_t(s.dv), int32_t(c.causal), int32_t(c.window_left), int32_t(c.window_right), c.scale, c.softcap},
          {c.dropout_p, c.dropout_seed},
          {}};
}

}  // namespace

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
  require_sendable(call_view(problem, lse != nullptr, false, want_keep), capabilities_,
                   domain_);  // a v1 plugin's: what ABI v1 carries
  out.resize(size_t(s.out_size()));
  if (lse) lse->resize(size_t(s.lse_size()));
  if (keep) keep->assign(want_keep ? size_t(s.scores_size()) : 0, kUnwrittenKeep);
  NarrowBuffers narrow;  // f16 and bf16 as bit patterns
  const attncheck_problem_v2 abi =
      to_abi_v2(problem, out.data(), lse ? lse->data() : nullptr, narrow, want_keep ? keep->data() : nullptr);
  const Request request = request_for(c, abi, lse != nullptr, false, want_keep);
  const void* const buffers[kBuffers] = {abi.q, abi.k, abi.v, c.allow.data(), c.key_lengths.data(), abi.bias};
  void* const into[kBuffers] = {nullptr, nullptr, nullptr, nullptr,          nullptr,
                                nullptr, nullptr, abi.out, abi.dropout_keep, abi.lse};
  const Outcome outcome = exchange(request, buffers, into, entry_point_name(version_, std::is_same_v<T, float>));
  widen_output(problem, narrow, out.data());
  return outcome;
}

template <class T>
Outcome IsolatedKernel::run_backward(const Case<T>& c, const Grads<T>& grads) {
  // c as run's; grads: out, dout [B,H,Tq,dv] and lse [B,H,Tq] in, dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk]
  // and dv [B,H_kv,Tk,dv] out.
  if (child_ < 0 && !past_budget()) start();
  const Problem<T> problem = c.problem();
  require_sendable(call_view(problem, false, true), capabilities_, domain_);
  NarrowBuffers narrow;
  NarrowGrads narrow_grads;
  attncheck_problem_v2 forward;
  const attncheck_grads_v2 abi = to_abi_grads(problem, grads, forward, narrow, narrow_grads);
  const Request request = request_for(c, forward, false, true);
  const void* const buffers[kBuffers] = {forward.q,    forward.k, forward.v,   c.allow.data(), c.key_lengths.data(),
                                         forward.bias, abi.dout,  forward.out, nullptr,        forward.lse};
  void* const into[kBuffers] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                nullptr, nullptr, nullptr, abi.dq,  abi.dk,  abi.dv};
  const Outcome outcome = exchange(request, buffers, into, "attncheck_backward_v2");
  widen_grads(problem, narrow_grads, grads);
  return outcome;
}

template <class T>
Outcome IsolatedKernel::run_layer(const LayerCase<T>& c, std::vector<T>& out, std::vector<T>* weights) {
  // c: x_q [B,Tq,D], x_kv [B,Tk,D], the maps and biases (layer.hpp), allow [B,Tq,Tk], key lengths
  // [B]; out [B,Tq,D] and, when asked, weights [B,H,Tq,Tk].
  if (child_ < 0 && !past_budget()) start();
  const Layer<T> layer = c.layer();
  const Shape& h = c.shape.heads;
  require_sendable(layer_call_view(layer, weights != nullptr), capabilities_, domain_);
  out.resize(size_t(c.shape.out_size()));
  if (weights) weights->resize(size_t(h.scores_size()));
  NarrowLayer narrow;
  const attncheck_mha_v2 abi = to_abi_mha(layer, out.data(), weights ? weights->data() : nullptr, narrow);
  uint32_t flags = 0;
  for (const Feature& f : features())
    if (f.used(layer_call_view(layer, weights != nullptr))) flags |= f.protocol_flag;
  auto part = [](bool present, uint32_t bit) { return present ? bit : 0u; };
  const uint32_t parts = part(c.self_attention, LayerHeader::kSelf) | part(abi.b_q, LayerHeader::kBiasQ) |
                         part(abi.b_k, LayerHeader::kBiasK) | part(abi.b_v, LayerHeader::kBiasV) |
                         part(abi.b_o, LayerHeader::kBiasO);
  const Request request{{abi.dtype, flags, abi.batch, abi.heads, abi.kv_heads, abi.q_len, abi.kv_len, abi.d_k, abi.d_v,
                         abi.causal, abi.window_left, abi.window_right, abi.scale, 0},
                        {},
                        {abi.d_model, parts, 0}};
  const void* buffers[kBuffers] = {};
  buffers[ALLOW] = c.allow.data();
  buffers[KV_LENS] = c.key_lengths.data();
  const void* const inputs[] = {abi.x_q, abi.x_kv, abi.w_q, abi.w_k, abi.w_v, abi.b_q, abi.b_k, abi.b_v, abi.w_o, abi.b_o};
  for (int n = 0; n < kLayerInputCount; ++n) buffers[X_Q + n] = inputs[n];
  void* into[kBuffers] = {};
  into[OUT] = abi.out;
  into[WEIGHTS] = abi.weights;
  const Outcome outcome = exchange(request, buffers, into, "attncheck_mha_forward_v2");
  widen_layer_output(layer, narrow, out.data());
  return outcome;
}

template Outcome IsolatedKernel::run_layer(const LayerCase<float>&, std::vector<float>&, std::vector<float>*);
template Outcome IsolatedKernel::run_layer(const LayerCase<double>&, std::vector<double>&, std::vector<double>*);
template Outcome IsolatedKernel::run(const Case<float>&, std::vector<float>&, std::vector<float>*, std::vector<uint8_t>*);
template Outcome IsolatedKernel::run(const Case<double>&, std::vector<double>&, std::vector<double>*, std::vector<uint8_t>*);
template Outcome IsolatedKernel::run_backward(const Case<float>&, const Grads<float>&);
template Outcome IsolatedKernel::run_backward(const Case<double>&, const Grads<double>&);

}  // namespace attncheck
