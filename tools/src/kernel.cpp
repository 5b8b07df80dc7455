#include "attncheck/kernel.hpp"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "attncheck/abi.hpp"
#include "attncheck/attention.hpp"
#include "attncheck/attention_backward.hpp"
#include "attncheck/features.hpp"
#include "attncheck/mha.hpp"
#include "attncheck/protocol.hpp"

namespace attncheck {

CaseLimits Kernel::limits(CaseLimits base) const {
  base.abi_only |= !full_contract;
  if (!full_contract) base.capabilities &= plugin.capabilities;
  base.domain = plugin.domain;
  return base;
}

uint32_t Kernel::claimed() const { return full_contract ? all_capabilities() : plugin.capabilities; }

Kernel load_kernel(const std::string& which) {
  const FpMode before = current_fp_mode();
  Kernel kernel;
  kernel.plugin = load_plugin(which);
  kernel.mode = current_fp_mode();
  set_fp_mode(before);
  kernel.fp_mode_finding = fp_mode_finding_at_load(before, kernel.mode);
  kernel.full_contract = which == "builtin";
  return kernel;
}

const Kernel& kernel_from_environment() {
  static const Kernel kernel = [] {
    const char* which = std::getenv("ATTNCHECK_IMPL");
    try {
      Kernel loaded = load_kernel(which && *which ? which : "builtin");
      std::fprintf(stderr, "attncheck: checking %s\n", loaded.plugin.name.c_str());
      if (!loaded.fp_mode_finding.empty()) std::fprintf(stderr, "attncheck: %s\n", loaded.fp_mode_finding.c_str());
      return loaded;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "attncheck: %s\n", e.what());
      std::exit(2);
    }
  }();
  return kernel;
}

template <class T>
int32_t run_kernel(const Kernel& kernel, const Case<T>& c, std::vector<T>& out, std::vector<T>* lse, std::vector<uint8_t>* keep) {
  const Shape& s = c.shape;
  out.assign(size_t(s.out_size()), std::numeric_limits<T>::quiet_NaN());  // unwritten outputs fail
  if (lse) lse->assign(size_t(s.lse_size()), std::numeric_limits<T>::quiet_NaN());
  const bool want_keep = keep && c.dropout_p > 0;
  if (keep) keep->assign(want_keep ? size_t(s.scores_size()) : 0, protocol::kUnwrittenKeep);
  T* lse_data = lse ? lse->data() : nullptr;
  uint8_t* keep_data = want_keep ? keep->data() : nullptr;
  const Problem<T> problem = c.problem();
  require_sendable(call_view(problem, lse != nullptr, false, want_keep), kernel.claimed(), kernel.domain());
  if (kernel.full_contract) {
    attention(problem, Result<T>{out.data(), nullptr, lse_data, keep_data});
    return 0;
  }
  const bool f32 = std::is_same_v<T, float>;
  const Plugin& plugin = kernel.plugin;
  std::vector<uint8_t> allow;  // v1: key lengths folded in
  const attncheck_problem v1 = plugin.version == 1 ? to_abi(problem, out.data(), allow) : attncheck_problem{};
  NarrowBuffers narrow;  // f16 and bf16 as bit patterns
  const attncheck_problem_v2 v2 =
      plugin.version == 1 ? attncheck_problem_v2{} : to_abi_v2(problem, out.data(), lse_data, narrow, keep_data);
  const FpMode caller = current_fp_mode();
  set_fp_mode(kernel.mode);
  const int32_t status = plugin.version == 1 ? (f32 ? plugin.forward_f32 : plugin.forward_f64)(&v1) : plugin.forward_v2(&v2);
  const FpMode after = current_fp_mode();
  set_fp_mode(caller);
  widen_outputs<T>(problem.format, narrow);
  if (kernel.fp_mode_call_finding.empty())
    kernel.fp_mode_call_finding = fp_mode_finding_in_call(entry_point_name(plugin.version, f32), kernel.mode, after);
  return status;
}

template <class T>
int32_t run_kernel_backward(const Kernel& kernel, const Case<T>& c, const Grads<T>& grads) {
  const Problem<T> problem = c.problem();
  require_sendable(call_view(problem, false, true), kernel.claimed(), kernel.domain());
  if (kernel.full_contract) {
    attention_backward(problem, grads);
    return 0;
  }
  NarrowBuffers narrow;
  attncheck_problem_v2 forward;
  const attncheck_grads_v2 abi = to_abi_grads(problem, grads, forward, narrow);
  const FpMode caller = current_fp_mode();
  set_fp_mode(kernel.mode);
  const int32_t status = kernel.plugin.backward_v2(&abi);
  const FpMode after = current_fp_mode();
  set_fp_mode(caller);
  widen_outputs<T>(problem.format, narrow);
  if (kernel.fp_mode_call_finding.empty())
    kernel.fp_mode_call_finding = fp_mode_finding_in_call("attncheck_backward_v2", kernel.mode, after);
  return status;
}

template <class T>
int32_t run_kernel_layer(const Kernel& kernel, const LayerCase<T>& c, std::vector<T>& out, std::vector<T>* weights) {
  const Layer<T> layer = c.layer();
  const Shape& h = c.shape.heads;
  out.assign(size_t(c.shape.out_size()), std::numeric_limits<T>::quiet_NaN());  // unwritten outputs fail
  if (weights) weights->assign(size_t(h.scores_size()), std::numeric_limits<T>::quiet_NaN());
  T* weights_data = weights ? weights->data() : nullptr;
  require_sendable(layer_call_view(layer, weights != nullptr), kernel.claimed(), kernel.domain());
  if (kernel.full_contract) {
    mha_forward(layer, LayerResult<T>{out.data(), weights_data});
    return 0;
  }
  NarrowBuffers narrow;
  const attncheck_mha_v2 abi = to_abi_mha(layer, out.data(), weights_data, narrow);
  const FpMode caller = current_fp_mode();
  set_fp_mode(kernel.mode);
  const int32_t status = kernel.plugin.mha_v2(&abi);
  const FpMode after = current_fp_mode();
  set_fp_mode(caller);
  widen_outputs<T>(layer.format, narrow);
  if (kernel.fp_mode_call_finding.empty())
    kernel.fp_mode_call_finding = fp_mode_finding_in_call("attncheck_mha_forward_v2", kernel.mode, after);
  return status;
}

template int32_t run_kernel_layer(const Kernel&, const LayerCase<float>&, std::vector<float>&, std::vector<float>*);
template int32_t run_kernel_layer(const Kernel&, const LayerCase<double>&, std::vector<double>&, std::vector<double>*);
template int32_t run_kernel_backward(const Kernel&, const Case<float>&, const Grads<float>&);
template int32_t run_kernel_backward(const Kernel&, const Case<double>&, const Grads<double>&);
template int32_t run_kernel(const Kernel&, const Case<float>&, std::vector<float>&, std::vector<float>*, std::vector<uint8_t>*);
template int32_t run_kernel(const Kernel&, const Case<double>&, std::vector<double>&, std::vector<double>*,
                            std::vector<uint8_t>*);

}  // namespace attncheck
