// Exporting a C++ attention function as a plugin, loaded exactly as a user's kernel is: the
// built-in implementation and the variants of impl/variants, through ABI v2 (or v1, for the one
// variant that keeps v1 under test).
#pragma once

#include <exception>
#include <type_traits>

#include "attncheck/abi.hpp"

namespace attncheck {

// The body of attncheck_forward_f32/_f64: 1 for a null problem, 2 for a malformed one, 3 when
// compute throws (nothing is thrown across C), else compute(problem, out) and 0.
template <class T, class Compute>
int32_t forward_through_abi(const attncheck_problem* p, Compute compute) {
  if (!p) return 1;
  const Problem<T> problem = from_abi<T>(*p);
  T* out = static_cast<T*>(p->out);
  if (!problem_error(problem, Result<T>{out}).empty()) return 2;
  try {
    compute(problem, Result<T>{out});
  } catch (const std::exception&) {
    return 3;
  }
  return 0;
}

// The body of attncheck_forward_v2: as above, and 4 for a format or dropout the plugin does not claim. An f16
// or bf16 problem is computed in float on its widened inputs, and its output rounded back.
template <class Compute>
int32_t forward_through_abi_v2(const attncheck_problem_v2* p, uint32_t capabilities, Compute compute) {
  if (!p) return 1;
  if (p->size < kProblemV2SizeBeforeDropout) return 2;
  auto run = [&](auto zero) -> int32_t {
    using T = decltype(zero);
    Problem<T> problem = from_abi_v2<T>(*p);
    Result<T> result{static_cast<T*>(p->out), nullptr, static_cast<T*>(p->lse),
                     carries_dropout(*p) && p->dropout_p > 0 ? p->dropout_keep : nullptr};
    if (!problem_error(problem, result).empty()) return 2;
    WideBuffers wide;
    if constexpr (std::is_same_v<T, float>)
      if (is_narrow(Format(p->dtype))) {
        widen_inputs(*p, problem, wide);
        result.out = wide.values[slot::OUT].data();
        if (!problem_error(problem, result).empty()) return 2;
      }
    try {
      compute(problem, result);
    } catch (const std::exception&) {
      return 3;
    }
    narrow_output(*p, wide);
    return 0;
  };
  if (!claims_dtype(capabilities, p->dtype)) return 4;
  if (carries_dropout(*p) && p->dropout_p != 0 && !(capabilities & ATTNCHECK_CAP_DROPOUT)) return 4;
  return p->dtype == ATTNCHECK_F64 ? run(0.0) : run(0.0f);
}

// The body of attncheck_backward_v2: 1 for a null g or problem, 2 for a malformed one, 3 when
// compute throws, 4 without ATTNCHECK_CAP_BACKWARD or the format; else compute(problem, grads) and
// 0. An f16 or bf16 backward is computed in float on its widened inputs, its gradients rounded back.
template <class Compute>
int32_t backward_through_abi_v2(const attncheck_grads_v2* g, uint32_t capabilities, Compute compute) {
  if (!g || !g->problem) return 1;
  const attncheck_problem_v2* p = g->problem;
  if (p->size < kProblemV2SizeBeforeDropout) return 2;
  auto run = [&](auto zero) -> int32_t {
    using T = decltype(zero);
    Problem<T> problem = from_abi_v2<T>(*p);
    Grads<T> grads{static_cast<const T*>(p->out), static_cast<const T*>(p->lse), static_cast<const T*>(g->dout),
                   static_cast<T*>(g->dq),        static_cast<T*>(g->dk),        static_cast<T*>(g->dv)};
    if (!problem_error(problem, Result<T>{grads.dq}).empty() || !grads.out || !grads.lse || !grads.dout || !grads.dk || !grads.dv)
      return 2;
    WideBuffers wide;
    if constexpr (std::is_same_v<T, float>)
      if (is_narrow(Format(p->dtype))) grads = widen_grads_inputs(*g, problem, wide);
    try {
      compute(problem, grads);
    } catch (const std::exception&) {
      return 3;
    }
    narrow_grads(*g, wide);
    return 0;
  };
  if (!(capabilities & ATTNCHECK_CAP_BACKWARD) || !claims_dtype(capabilities, p->dtype)) return 4;
  return p->dtype == ATTNCHECK_F64 ? run(0.0) : run(0.0f);
}

// The body of attncheck_mha_forward_v2: 1 for a null layer, 2 for a malformed one, 3 when compute
// throws, 4 without ATTNCHECK_CAP_MHA, the format, or (weights asked) ATTNCHECK_CAP_MHA_WEIGHTS; else
// compute(layer, result) and 0. An f16 or bf16 layer is computed in float on its widened inputs,
// its output rounded back; its weights are float as they are.
template <class Compute>
int32_t layer_through_abi_v2(const attncheck_mha_v2* m, uint32_t capabilities, Compute compute) {
  if (!m) return 1;
  if (m->size < int32_t(sizeof(attncheck_mha_v2))) return 2;
  if (!(capabilities & ATTNCHECK_CAP_MHA) || !claims_dtype(capabilities, m->dtype) ||
      (m->weights && !(capabilities & ATTNCHECK_CAP_MHA_WEIGHTS)))
    return 4;
  auto run = [&](auto zero) -> int32_t {
    using T = decltype(zero);
    Layer<T> layer = from_abi_mha<T>(*m);
    LayerResult<T> result{static_cast<T*>(m->out), reinterpret_cast<T*>(m->weights)};
    if (!layer_error(layer, result).empty()) return 2;
    WideBuffers wide;
    if constexpr (std::is_same_v<T, float>)
      if (is_narrow(Format(m->dtype))) {
        widen_layer_inputs(*m, layer, wide);
        result.out = wide.values[slot::LAYER_OUT].data();
        if (!layer_error(layer, result).empty()) return 2;
      }
    try {
      compute(layer, result);
    } catch (const std::exception&) {
      return 3;
    }
    narrow_layer_output(*m, wide);
    return 0;
  };
  return m->dtype == ATTNCHECK_F64 ? run(0.0) : run(0.0f);
}

}  // namespace attncheck

#define ATTNCHECK_EXPORT extern "C" __attribute__((visibility("default")))

// Defines the three ABI v1 symbols around COMPUTE, a generic callable (problem, Result).
#define ATTNCHECK_EXPORT_PLUGIN(COMPUTE)                                                 \
  ATTNCHECK_EXPORT int32_t attncheck_abi_version(void) { return ATTNCHECK_ABI_VERSION; } \
  ATTNCHECK_EXPORT int32_t attncheck_forward_f32(const attncheck_problem* p) {           \
    return attncheck::forward_through_abi<float>(p, COMPUTE);                            \
  }                                                                                      \
  ATTNCHECK_EXPORT int32_t attncheck_forward_f64(const attncheck_problem* p) {           \
    return attncheck::forward_through_abi<double>(p, COMPUTE);                           \
  }

// Defines attncheck_backward_v2 around COMPUTE, a generic callable (problem, Grads), for a plugin
// whose CAPABILITIES (those of ATTNCHECK_EXPORT_PLUGIN_V2) claim ATTNCHECK_CAP_BACKWARD.
#define ATTNCHECK_EXPORT_BACKWARD_V2(COMPUTE, CAPABILITIES)                     \
  ATTNCHECK_EXPORT int32_t attncheck_backward_v2(const attncheck_grads_v2* g) { \
    return attncheck::backward_through_abi_v2(g, (CAPABILITIES), COMPUTE);      \
  }

// Defines the three ABI v2 symbols around COMPUTE (as above) claiming CAPABILITIES.
#define ATTNCHECK_EXPORT_PLUGIN_V2(COMPUTE, CAPABILITIES)                                  \
  ATTNCHECK_EXPORT int32_t attncheck_abi_version(void) { return ATTNCHECK_ABI_VERSION_2; } \
  ATTNCHECK_EXPORT uint32_t attncheck_capabilities(void) { return (CAPABILITIES); }        \
  ATTNCHECK_EXPORT int32_t attncheck_forward_v2(const attncheck_problem_v2* p) {           \
    return attncheck::forward_through_abi_v2(p, (CAPABILITIES), COMPUTE);                  \
  }

// Defines attncheck_mha_forward_v2 around COMPUTE, a generic callable (layer, LayerResult), for a
// plugin whose CAPABILITIES claim ATTNCHECK_CAP_MHA.
#define ATTNCHECK_EXPORT_LAYER_V2(COMPUTE, CAPABILITIES)                         \
  ATTNCHECK_EXPORT int32_t attncheck_mha_forward_v2(const attncheck_mha_v2* m) { \
    return attncheck::layer_through_abi_v2(m, (CAPABILITIES), COMPUTE);          \
  }
