// The variant a plugin of impl/variants exports, named by its build: variant_plugin.cpp and
// layer_plugin.cpp are compiled once, and each plugin adds variant_choice.cpp compiled with its names.
#pragma once

namespace attncheck {

struct VariantChoice {
  const char* forward;   // a planted bug (planted_bugs.def) or a correct variant's name: the forward's, or the layer's
  const char* backward;  // the same of the backward (flash_backward unless the build names one); unused by a layer plugin
};

// Defined by variant_choice.cpp in each plugin; hidden, so that every plugin keeps its own.
[[gnu::visibility("hidden")]] extern const VariantChoice kVariantChoice;

}  // namespace attncheck
