// Exporting a C++ attention function as a plugin through ABI v1: the built-in implementation and
// the variants of impl/variants are loaded exactly as a user's kernel is.
#pragma once

#include <exception>

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
    compute(problem, out);
  } catch (const std::exception&) {
    return 3;
  }
  return 0;
}

}  // namespace attncheck

// Defines the three ABI v1 symbols around COMPUTE, a generic callable (problem, out).
#define ATTNCHECK_EXPORT_PLUGIN(COMPUTE)                                                             \
  extern "C" __attribute__((visibility("default"))) int32_t attncheck_abi_version(void) {           \
    return ATTNCHECK_ABI_VERSION;                                                                    \
  }                                                                                                  \
  extern "C" __attribute__((visibility("default"))) int32_t attncheck_forward_f32(const attncheck_problem* p) { \
    return attncheck::forward_through_abi<float>(p, COMPUTE);                                        \
  }                                                                                                  \
  extern "C" __attribute__((visibility("default"))) int32_t attncheck_forward_f64(const attncheck_problem* p) { \
    return attncheck::forward_through_abi<double>(p, COMPUTE);                                       \
  }
