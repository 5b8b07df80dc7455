// One variant of impl/variants exported through plugin ABI v2 (ABI v1 with ATTNCHECK_ABI_V1, so that
// a v1 plugin stays under test). The build names it: ATTNCHECK_MUTATION (a Mutation enumerator) for a
// planted bug, or ATTNCHECK_CORRECT (a correct_variants() name); and its backward:
// ATTNCHECK_BACKWARD_MUTATION (a BackwardMutation) or ATTNCHECK_CORRECT_BACKWARD (a
// correct_backward_variants() name), else FlashAttention-2's, flash_backward.
#include <cstdlib>
#include <cstring>

#include "attncheck/plugin_export.hpp"
#include "backward.hpp"
#include "variant.hpp"

namespace {

#define ATTNCHECK_STRING(x) ATTNCHECK_STRING_(x)
#define ATTNCHECK_STRING_(x) #x

const attncheck::Variant& variant() {
  static const attncheck::Variant chosen = [] {
#ifdef ATTNCHECK_MUTATION
    return attncheck::mutant(attncheck::Mutation::ATTNCHECK_MUTATION);
#else
    for (const auto& named : attncheck::correct_variants())
      if (std::strcmp(named.name, ATTNCHECK_STRING(ATTNCHECK_CORRECT)) == 0) return named.variant;
    std::abort();  // the build named a variant that correct_variants() does not have
#endif
  }();
  return chosen;
}

#ifndef ATTNCHECK_CORRECT_BACKWARD
#define ATTNCHECK_CORRECT_BACKWARD flash_backward
#endif

// Unused in a build of the forward alone (no backward defined).
[[maybe_unused]] const attncheck::BackwardVariant& backward_variant() {
  static const attncheck::BackwardVariant chosen = [] {
#ifdef ATTNCHECK_BACKWARD_MUTATION
    return attncheck::backward_mutant(attncheck::BackwardMutation::ATTNCHECK_BACKWARD_MUTATION);
#else
    for (const auto& named : attncheck::correct_backward_variants())
      if (std::strcmp(named.name, ATTNCHECK_STRING(ATTNCHECK_CORRECT_BACKWARD)) == 0) return named.variant;
    std::abort();  // the build named a backward that correct_backward_variants() does not have
#endif
  }();
  return chosen;
}

// The variants take every mask, grouped KV heads, windows, soft-caps and a bias, in every format (f16
// and bf16 computed in float), return the log-sum-exp, have a backward, and dropout with its mask.
constexpr uint32_t kVariantCapabilities = ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_F64 | ATTNCHECK_CAP_F16 | ATTNCHECK_CAP_BF16 |
                                          ATTNCHECK_CAP_ALLOW | ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_KV_LENS | ATTNCHECK_CAP_GQA |
                                          ATTNCHECK_CAP_WINDOW | ATTNCHECK_CAP_SOFTCAP | ATTNCHECK_CAP_BIAS | ATTNCHECK_CAP_LSE |
                                          ATTNCHECK_CAP_BACKWARD | ATTNCHECK_CAP_DROPOUT | ATTNCHECK_CAP_DROPOUT_MASK;

}  // namespace

#ifdef ATTNCHECK_ABI_V1
ATTNCHECK_EXPORT_PLUGIN([](const auto& problem, const auto& result) {
  attncheck::variant_attention(problem, result.out, variant());
})
#else
ATTNCHECK_EXPORT_PLUGIN_V2(
    [](const auto& problem, const auto& result) {
      attncheck::variant_attention(problem, result.out, variant(), result.lse, result.keep);
    },
    kVariantCapabilities)
ATTNCHECK_EXPORT_BACKWARD_V2([](const auto& problem,
                                const auto& grads) { attncheck::variant_backward(problem, grads, backward_variant()); },
                             kVariantCapabilities)
#endif
