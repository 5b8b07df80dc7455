// One variant of impl/variants exported through plugin ABI v1; the build names it with
// ATTNCHECK_MUTATION (a Mutation enumerator), so each planted bug is its own plugin.
#include "attncheck/plugin_export.hpp"
#include "variant.hpp"

ATTNCHECK_EXPORT_PLUGIN([](const auto& problem, auto* out) {
  attncheck::variant_attention(problem, out, attncheck::mutant(attncheck::Mutation::ATTNCHECK_MUTATION));
})
