// The built-in implementation exported through plugin ABI v1, so that it is loaded and checked
// exactly as a user's kernel is.
#include <exception>

#include "attncheck/attention.hpp"
#include "attncheck/plugin.h"

namespace {

using attncheck::Causal;
using attncheck::Problem;
using attncheck::Result;

template <class T>
int32_t forward(const attncheck_problem* p) {
  // p: the ABI view of Q [B,H,Tq,dk], K [B,H,Tk,dk], V [B,H,Tk,dv], allow [B,Tq,Tk], out [B,H,Tq,dv].
  if (!p) return 1;
  Problem<T> problem;
  problem.shape = {p->batch, p->heads, p->q_len, p->kv_len, p->d_k, p->d_v};
  problem.q = static_cast<const T*>(p->q);
  problem.k = static_cast<const T*>(p->k);
  problem.v = static_cast<const T*>(p->v);
  problem.masks.allow = p->allow;
  problem.masks.causal = Causal(p->causal);
  problem.scale = p->scale;
  const Result<T> result{static_cast<T*>(p->out)};
  if (!attncheck::problem_error(problem, result).empty()) return 2;
  try {
    attncheck::attention(problem, result);
  } catch (const std::exception&) {  // out of memory for the workspaces: refuse, never throw across C
    return 3;
  }
  return 0;
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) int32_t attncheck_abi_version(void) { return ATTNCHECK_ABI_VERSION; }
__attribute__((visibility("default"))) int32_t attncheck_forward_f32(const attncheck_problem* p) {
  return forward<float>(p);
}
__attribute__((visibility("default"))) int32_t attncheck_forward_f64(const attncheck_problem* p) {
  return forward<double>(p);
}
}
