// One layer variant of impl/variants (layer_variant.hpp) as a plugin of the layer alone: ABI v2's
// attncheck_abi_version, attncheck_capabilities and attncheck_mha_forward_v2, and no
// attncheck_forward_v2 (the formats and masks it claims are then the layer's). The build names it:
// ATTNCHECK_LAYER_MUTATION (a LayerMutation enumerator, in the variant it lives in) for a planted
// bug, or ATTNCHECK_LAYER_CORRECT (a correct_layer_variants() name).
#include <cstdlib>
#include <cstring>

#include "attncheck/plugin_export.hpp"
#include "layer_variant.hpp"

namespace {

#define ATTNCHECK_STRING(x) ATTNCHECK_STRING_(x)
#define ATTNCHECK_STRING_(x) #x

struct Chosen {
  attncheck::LayerVariant variant;
  attncheck::LayerMutation mutation;
};

const Chosen& chosen() {
  static const Chosen c = [] {
#ifdef ATTNCHECK_LAYER_MUTATION
    const attncheck::LayerMutation m = attncheck::LayerMutation::ATTNCHECK_LAYER_MUTATION;
    return Chosen{attncheck::layer_mutant_home(m), m};
#else
    for (const auto& named : attncheck::correct_layer_variants())
      if (std::strcmp(named.name, ATTNCHECK_STRING(ATTNCHECK_LAYER_CORRECT)) == 0)
        return Chosen{named.variant, attncheck::LayerMutation::none};
    std::abort();  // the build named a variant that correct_layer_variants() does not have
#endif
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
