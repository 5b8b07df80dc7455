// One variant of impl/variants exported through plugin ABI v2 (ABI v1 with ATTNCHECK_ABI_V1, so that
// a v1 plugin stays under test), compiled once: each plugin names its variant in kVariantChoice
// (variant_choice.cpp): the forward, a planted bug (a Mutation) or a correct_variants() name; the
// backward, a BackwardMutation or a correct_backward_variants() name (FlashAttention-2's,
// flash_backward, unless named).
#include <cstdlib>
#include <cstring>
#include <optional>

#include "attncheck/plugin_export.hpp"
#include "backward.hpp"
#include "variant.hpp"
#include "variant_choice.hpp"

namespace {

using attncheck::kVariantChoice;
bool named(const char* name, const char* chosen) { return std::strcmp(name, chosen) == 0; }

// The planted bug of each kind named `name`, if one is (planted_bugs.def's rows).
std::optional<attncheck::Variant> planted_forward(const char* name) {
#define ATTNCHECK_FORWARD_BUG(bug) \
  if (named(#bug, name)) return attncheck::mutant(attncheck::Mutation::bug);
#include "planted_bugs.def"
#undef ATTNCHECK_FORWARD_BUG
  return std::nullopt;
}
std::optional<attncheck::BackwardVariant> planted_backward(const char* name) {
#define ATTNCHECK_BACKWARD_BUG(bug) \
  if (named(#bug, name)) return attncheck::backward_mutant(attncheck::BackwardMutation::bug);
#include "planted_bugs.def"
#undef ATTNCHECK_BACKWARD_BUG
  return std::nullopt;
}

// The variant named `name`: the planted bug found, else the correct variant of that name.
template <class V, class Correct>
V chosen(const char* name, const std::optional<V>& planted, const Correct& correct) {
  if (planted) return *planted;
  for (const auto& variant : correct)
    if (named(variant.name, name)) return variant.variant;
  std::abort();  // the build named a variant that neither list has
}

const attncheck::Variant& variant() {
  static const attncheck::Variant forward =
      chosen(kVariantChoice.forward, planted_forward(kVariantChoice.forward), attncheck::correct_variants());
  return forward;
}

// Unused in a build of the forward alone (no backward defined).
[[maybe_unused]] const attncheck::BackwardVariant& backward_variant() {
  static const attncheck::BackwardVariant backward =
      chosen(kVariantChoice.backward, planted_backward(kVariantChoice.backward), attncheck::correct_backward_variants());
  return backward;
}

// The variants take every mask (KV-end causal too), grouped KV heads, windows, soft-caps, a bias, sinks, paged K and V
// (gathered first) and packed sequences (varlen, masked as one batch), in every format (f16 and bf16 computed in float), return
// the log-sum-exp, have a backward, and dropout with its mask.
constexpr uint32_t kVariantCapabilities =
    ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_F64 | ATTNCHECK_CAP_F16 | ATTNCHECK_CAP_BF16 | ATTNCHECK_CAP_ALLOW | ATTNCHECK_CAP_CAUSAL |
    ATTNCHECK_CAP_KV_LENS | ATTNCHECK_CAP_GQA | ATTNCHECK_CAP_WINDOW | ATTNCHECK_CAP_SOFTCAP | ATTNCHECK_CAP_BIAS |
    ATTNCHECK_CAP_LSE | ATTNCHECK_CAP_BACKWARD | ATTNCHECK_CAP_DROPOUT | ATTNCHECK_CAP_DROPOUT_MASK | ATTNCHECK_CAP_SINKS |
    ATTNCHECK_CAP_KV_CACHE | ATTNCHECK_CAP_PAGED_KV | ATTNCHECK_CAP_VARLEN;

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
