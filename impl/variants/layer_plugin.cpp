// One layer variant of impl/variants (layer_variant.hpp) as a plugin of the layer alone: ABI v2's
// attncheck_abi_version, attncheck_capabilities and attncheck_mha_forward_v2, and no
// attncheck_forward_v2 (the formats and masks it claims are then the layer's). Compiled once: each
// plugin names its variant in kVariantChoice.forward (variant_choice.cpp): a planted bug (a
// LayerMutation, in the variant it lives in) or a correct_layer_variants() name.
#include <cstdlib>
#include <cstring>

#include "attncheck/plugin_export.hpp"
#include "layer_variant.hpp"
#include "variant_choice.hpp"

namespace {

struct Chosen {
  attncheck::LayerVariant variant;
  attncheck::LayerMutation mutation;
};

const Chosen& chosen() {
  static const Chosen c = [] {
    const char* name = attncheck::kVariantChoice.forward;
#define ATTNCHECK_LAYER_BUG(bug)    \
  if (std::strcmp(#bug, name) == 0) \
    return Chosen{attncheck::layer_mutant_home(attncheck::LayerMutation::bug), attncheck::LayerMutation::bug};
#include "planted_bugs.def"
#undef ATTNCHECK_LAYER_BUG
    for (const auto& correct : attncheck::correct_layer_variants())
      if (std::strcmp(correct.name, name) == 0) return Chosen{correct.variant, attncheck::LayerMutation::none};
    std::abort();  // the build named a variant that neither list has
  }();
  return c;
}

// Every format (f16 and bf16 computed in float, through layer_through_abi_v2), every mask, grouped
// KV heads, windows, and each head's weights.
constexpr uint32_t kLayerCapabilities = ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_F64 | ATTNCHECK_CAP_F16 | ATTNCHECK_CAP_BF16 |
                                        ATTNCHECK_CAP_ALLOW | ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_KV_LENS | ATTNCHECK_CAP_GQA |
                                        ATTNCHECK_CAP_WINDOW | ATTNCHECK_CAP_MHA | ATTNCHECK_CAP_MHA_WEIGHTS;

}  // namespace

ATTNCHECK_EXPORT int32_t attncheck_abi_version(void) { return ATTNCHECK_ABI_VERSION_2; }
ATTNCHECK_EXPORT uint32_t attncheck_capabilities(void) { return kLayerCapabilities; }
ATTNCHECK_EXPORT_LAYER_V2([](const auto& layer,
                             const auto& result) { attncheck::mha_variant(layer, result, chosen().variant, chosen().mutation); },
                          kLayerCapabilities)
