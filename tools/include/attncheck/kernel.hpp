// The implementation under test in this process, and running it on a case: how the RapidCheck
// properties and the fuzzers call a kernel (`attncheck check` runs it in a child process instead:
// isolated_kernel.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attncheck/cases.hpp"
#include "attncheck/fp_mode.hpp"
#include "attncheck/layer_cases.hpp"
#include "attncheck/plugin_loader.hpp"

namespace attncheck {

// An implementation: the built-in one through its C++ API (the whole contract: bias, both
// empty-row policies), or a plugin through ABI v1 or v2 (empty rows 0; what its capabilities say).
// A plugin runs in the floating-point mode its loading left (what a program that links it gets);
// the caller's own arithmetic (the oracle, the bound) always runs in the mode it had.
struct Kernel {
  Plugin plugin;
  bool full_contract = false;
  FpMode mode;                               // the plugin's mode: the process's after loading it
  std::string fp_mode_finding;               // how loading it changed the mode, or empty
  mutable std::string fp_mode_call_finding;  // the first change a call made and left, or empty
  // Limits for draw_case so that every case drawn is one this kernel can take.
  CaseLimits limits(CaseLimits base = {}) const;
  // What it claims, ABI v2's bits: the built-in one, everything.
  uint32_t claimed() const;
  // What it takes within its claims (domain.hpp): the plugin's restrictions and limits.
  const Domain& domain() const { return plugin.domain; }
  // Whether it returns the log-sum-exp: the built-in one, or a plugin claiming ATTNCHECK_CAP_LSE.
  bool has_lse() const { return claimed() & ATTNCHECK_CAP_LSE; }
  // Whether it has a backward: the built-in one, or a plugin claiming ATTNCHECK_CAP_BACKWARD.
  bool has_backward() const { return claimed() & ATTNCHECK_CAP_BACKWARD; }
};

// "builtin" (the C++ API) or a plugin's path; throws std::runtime_error with a one-line reason.
Kernel load_kernel(const std::string& which);

// $ATTNCHECK_IMPL, else the built-in implementation; a bad plugin ends the process with its reason, exit 2.
const Kernel& kernel_from_environment();

// Runs the kernel on case c into out [B,H,Tq,dv] and, when given (has_lse()), lse [B,H,Tq]; with
// dropout and keep given (ATTNCHECK_CAP_DROPOUT_MASK), the keep mask [B,H,Tq,Tk], each byte
// protocol::kUnwrittenKeep unless written. 0, or the plugin's non-zero refusal. A case that uses
// a feature the kernel does not claim is never sent: UnclaimedFeature (features.hpp), the harness's fault.
template <class T>
int32_t run_kernel(const Kernel& kernel, const Case<T>& c, std::vector<T>& out, std::vector<T>* lse = nullptr,
                   std::vector<uint8_t>* keep = nullptr);

// Runs the kernel's backward (has_backward()) on case c: grads' out, lse and dout in, dq, dk and dv
// written. 0, or the plugin's non-zero refusal; UnclaimedFeature as run_kernel.
template <class T>
int32_t run_kernel_backward(const Kernel& kernel, const Case<T>& c, const Grads<T>& grads);

// Runs the kernel's multi-head layer (ATTNCHECK_CAP_MHA) on layer case c into out [B,Tq,D] and,
// when given (ATTNCHECK_CAP_MHA_WEIGHTS), weights [B,H,Tq,Tk]. 0, or the plugin's non-zero refusal;
// UnclaimedFeature as run_kernel.
template <class T>
int32_t run_kernel_layer(const Kernel& kernel, const LayerCase<T>& c, std::vector<T>& out, std::vector<T>* weights = nullptr);

}  // namespace attncheck
