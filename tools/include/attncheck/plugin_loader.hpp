// Loading an attention implementation through plugin ABI v1 or v2.
#pragma once

#include <cstdint>
#include <string>

#include "attncheck/domain.hpp"
#include "attncheck/plugin.h"

namespace attncheck {

// What a v1 plugin can take, in ABI v2's capability bits: float32 (float64 with its entry point),
// an allow mask, causal masks, and key lengths (folded into the allow mask it receives).
inline constexpr uint32_t kAbiV1Capabilities =
    ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_ALLOW | ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_KV_LENS;

// A loaded implementation: its name, ABI version, capabilities and entry points.
struct Plugin {
  std::string name;  // "builtin" or the library's path
  int32_t version = 1;
  uint32_t capabilities = 0;                                   // ABI v2's bits (v1's: kAbiV1Capabilities, + F64)
  int32_t (*forward_f32)(const attncheck_problem*) = nullptr;  // v1
  int32_t (*forward_f64)(const attncheck_problem*) = nullptr;  // v1, null when the plugin has none
  int32_t (*forward_v2)(const attncheck_problem_v2*) = nullptr;
  int32_t (*backward_v2)(const attncheck_grads_v2*) = nullptr;  // with ATTNCHECK_CAP_BACKWARD
  int32_t (*mha_v2)(const attncheck_mha_v2*) = nullptr;         // with ATTNCHECK_CAP_MHA
  Domain domain{};  // its restrictions and limits (attncheck_restrictions, attncheck_limits_v2), when it exports them
  bool has_f64() const { return capabilities & ATTNCHECK_CAP_F64; }
};

// "builtin" gives the built-in implementation linked into this program (through ABI v2); anything
// else is a shared library's path, opened with dlopen: attncheck_abi_version() 1 with
// attncheck_forward_f32, or 2 with attncheck_capabilities and attncheck_forward_v2 (or, claiming
// ATTNCHECK_CAP_MHA, attncheck_mha_forward_v2 alone: its capabilities then carry kLayerOnly), and
// either may export attncheck_restrictions (and with ATTNCHECK_ONLY_WITHIN_LIMITS attncheck_limits_v2).
// Throws std::runtime_error with a one-line reason otherwise.
Plugin load_plugin(const std::string& which);

// The entry point a call of the given precision goes through, for reports: attncheck_forward_f32,
// attncheck_forward_f64 or attncheck_forward_v2.
inline const char* entry_point_name(int32_t version, bool f32) {
  return version == 1 ? (f32 ? "attncheck_forward_f32" : "attncheck_forward_f64") : "attncheck_forward_v2";
}

}  // namespace attncheck
