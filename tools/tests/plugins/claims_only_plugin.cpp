// The built-in implementation behind a plugin that claims only ATTNCHECK_CLAIMS (a build definition,
// ABI v2's bits) and refuses, with status 9, every call that uses anything else: a careful user's
// minimal kernel. What a call uses is read off the ABI's own fields here, not off attncheck's
// feature table, so that a table row that misses a use is caught too. attncheck must never send it
// such a call (issue 22): a refusal is then a finding ("refused a valid problem"), and the
// campaign's ctest fails.
#include <time.h>
#include <unistd.h>

#include "attncheck/attention.hpp"
#include "attncheck/attention_backward.hpp"
#include "attncheck/plugin_export.hpp"

namespace {

constexpr uint32_t kClaims = ATTNCHECK_CLAIMS;

bool claims(uint32_t bit) { return (kClaims & bit) != 0; }

// Whether the forward problem p (lse asked when `forward`) uses only what the plugin claims.
bool within_claims(const attncheck_problem_v2* p, bool forward) {
  if (!p || p->dtype < ATTNCHECK_F32 || p->dtype > ATTNCHECK_BF16 || !claims(1u << uint32_t(p->dtype))) return false;
  if (p->allow && !claims(ATTNCHECK_CAP_ALLOW)) return false;
  if (p->causal != 0 && !claims(ATTNCHECK_CAP_CAUSAL)) return false;
  if (p->kv_lens && !claims(ATTNCHECK_CAP_KV_LENS)) return false;
  if (p->kv_heads != p->heads && !claims(ATTNCHECK_CAP_GQA)) return false;
  if ((p->window_left != -1 || p->window_right != -1) && !claims(ATTNCHECK_CAP_WINDOW)) return false;
  if (p->softcap != 0 && !claims(ATTNCHECK_CAP_SOFTCAP)) return false;
  if (p->bias && !claims(ATTNCHECK_CAP_BIAS)) return false;
  return !(forward && p->lse && !claims(ATTNCHECK_CAP_LSE));
}

#ifdef ATTNCHECK_STALLS
// A correct kernel on a bad day (issue 36): every 25th call sleeps 1.2 s (a machine too busy to run
// it), and the 5th call of each process spins 1.5 s of CPU time (a page-fault storm, a thread pool
// spinning on a loaded machine). Neither is a hang.
void stall() {
  static int calls = 0;
  if (++calls % 25 == 0) usleep(1200000);
  if (calls != 5) return;
  auto cpu = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  };
  for (const double start = cpu(); cpu() - start < 1.5;) {}
}
#else
void stall() {}
#endif

}  // namespace

ATTNCHECK_EXPORT int32_t attncheck_abi_version(void) { return ATTNCHECK_ABI_VERSION_2; }
ATTNCHECK_EXPORT uint32_t attncheck_capabilities(void) { return kClaims; }
ATTNCHECK_EXPORT int32_t attncheck_forward_v2(const attncheck_problem_v2* p) {
  stall();
  if (!within_claims(p, true)) return 9;
  return attncheck::forward_through_abi_v2(
      p, kClaims, [](const auto& problem, const auto& result) { attncheck::attention(problem, result); });
}
ATTNCHECK_EXPORT int32_t attncheck_backward_v2(const attncheck_grads_v2* g) {
  if (!g || !claims(ATTNCHECK_CAP_BACKWARD) || !within_claims(g->problem, false)) return 9;
  return attncheck::backward_through_abi_v2(
      g, kClaims, [](const auto& problem, const auto& grads) { attncheck::attention_backward(problem, grads); });
}
