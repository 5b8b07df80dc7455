// The built-in implementation whose answers vary between identical calls (issue 36), by VARIES, the
// plugin's name (tools/tests/CMakeLists.txt):
// varies_correctly: every other call rounds each output 1 ulp toward zero (two correct algorithms, taken at
//    random by a real kernel: a thread count, a split): never a finding;
// wrong_every_other_call: every second call adds 1 to the first output (wrong on every other call): a replay, whose
//    first call is right, says its answers vary, never "no longer fails";
// writes_12345: every output 12345 (wrong on every call);
// leaks_padded_values: every call adds the f32 values of keys past each batch's key length to its outputs (a leak
//    through ordinary numbers, which zeroing what no query may see hides): "changed by a forbidden
//    input", not "poisoned".
#include <cmath>
#include <cstddef>

#include "attncheck/attention.hpp"
#include "attncheck/plugin_export.hpp"

namespace {

enum Varies { varies_correctly, wrong_every_other_call, writes_12345, leaks_padded_values };

constexpr uint32_t kClaims =
    ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_F64 | ATTNCHECK_CAP_ALLOW | ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_KV_LENS;

template <class T>
void vary(T* out, size_t n, bool odd) {
  for (size_t e = 0; e < n; ++e) {
    if (VARIES == varies_correctly && odd && std::isfinite(out[e]) && out[e] != 0) out[e] = std::nextafter(out[e], T(0));
    if (VARIES == wrong_every_other_call && !odd && e == 0) out[e] += 1;
    if (VARIES == writes_12345) out[e] = 12345;
  }
}

}  // namespace

ATTNCHECK_EXPORT int32_t attncheck_abi_version(void) { return ATTNCHECK_ABI_VERSION_2; }
ATTNCHECK_EXPORT uint32_t attncheck_capabilities(void) { return kClaims; }
ATTNCHECK_EXPORT int32_t attncheck_forward_v2(const attncheck_problem_v2* p) {
  static int calls = 0;
  const int32_t status = attncheck::forward_through_abi_v2(
      p, kClaims, [](const auto& problem, const auto& result) { attncheck::attention(problem, result); });
  if (status != 0) return status;
  const size_t n = size_t(p->batch) * size_t(p->heads) * size_t(p->q_len) * size_t(p->d_v);
  const bool odd = ++calls % 2 == 1;
  if (p->dtype == ATTNCHECK_F32) vary(static_cast<float*>(p->out), n, odd);
  if (VARIES == leaks_padded_values && p->dtype == ATTNCHECK_F32 && p->kv_lens && p->kv_heads == p->heads)
    for (int64_t b = 0; b < p->batch; ++b)
      for (int64_t h = 0; h < p->heads; ++h)
        for (int64_t i = 0; i < p->q_len; ++i)
          for (int64_t j = p->kv_lens[b]; j < p->kv_len; ++j)
            for (int64_t c = 0; c < p->d_v; ++c)
              static_cast<float*>(p->out)[((b * p->heads + h) * p->q_len + i) * p->d_v + c] +=
                  static_cast<const float*>(p->v)[((b * p->heads + h) * p->kv_len + j) * p->d_v + c];
  if (p->dtype == ATTNCHECK_F64) vary(static_cast<double*>(p->out), n, odd);
  return 0;
}
