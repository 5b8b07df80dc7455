// The built-in implementation exported through plugin ABI v2, with every capability it has.
#include "attncheck/attention.hpp"
#include "attncheck/attention_backward.hpp"
#include "attncheck/mha.hpp"
#include "attncheck/plugin_export.hpp"

namespace attncheck {
// What the built-in implementation takes: every format (f16 and bf16 computed in float, the
// output rounded), every mask, grouped KV heads, windows, soft-caps, a bias, the log-sum-exp, and
// the backward pass, dropout (Philox, dropout.hpp) with its keep mask, and the multi-head layer
// (mha.hpp) with its weights, sinks, the KV-end causal mask, paged K and V (gathered first) and packed
// sequences (varlen, one batch under their mask).
inline constexpr uint32_t kBuiltinCapabilities =
    ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_F64 | ATTNCHECK_CAP_F16 | ATTNCHECK_CAP_BF16 | ATTNCHECK_CAP_ALLOW | ATTNCHECK_CAP_CAUSAL |
    ATTNCHECK_CAP_KV_LENS | ATTNCHECK_CAP_GQA | ATTNCHECK_CAP_WINDOW | ATTNCHECK_CAP_SOFTCAP | ATTNCHECK_CAP_BIAS |
    ATTNCHECK_CAP_LSE | ATTNCHECK_CAP_BACKWARD | ATTNCHECK_CAP_DROPOUT | ATTNCHECK_CAP_DROPOUT_MASK | ATTNCHECK_CAP_MHA |
    ATTNCHECK_CAP_MHA_WEIGHTS | ATTNCHECK_CAP_SINKS | ATTNCHECK_CAP_KV_CACHE | ATTNCHECK_CAP_PAGED_KV | ATTNCHECK_CAP_VARLEN;
}  // namespace attncheck

ATTNCHECK_EXPORT_PLUGIN_V2([](const auto& problem, const auto& result) { attncheck::attention(problem, result); },
                           attncheck::kBuiltinCapabilities)
ATTNCHECK_EXPORT_BACKWARD_V2([](const auto& problem, const auto& grads) { attncheck::attention_backward(problem, grads); },
                             attncheck::kBuiltinCapabilities)
ATTNCHECK_EXPORT_LAYER_V2([](const auto& layer, const auto& result) { attncheck::mha_forward(layer, result); },
                          attncheck::kBuiltinCapabilities)
