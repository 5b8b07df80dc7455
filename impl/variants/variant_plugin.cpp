// One variant of impl/variants exported through plugin ABI v1. The build names it: ATTNCHECK_MUTATION
// (a Mutation enumerator) for a planted bug, or ATTNCHECK_CORRECT (a correct_variants() name).
#include <cstdlib>
#include <cstring>

#include "attncheck/plugin_export.hpp"
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

}  // namespace

ATTNCHECK_EXPORT_PLUGIN([](const auto& problem, auto* out) { attncheck::variant_attention(problem, out, variant()); })
