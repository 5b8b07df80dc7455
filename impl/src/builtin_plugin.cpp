// The built-in implementation exported through plugin ABI v1.
#include "attncheck/attention.hpp"
#include "attncheck/plugin_export.hpp"

ATTNCHECK_EXPORT_PLUGIN([](const auto& problem, auto* out) {
  attncheck::attention(problem, attncheck::Result<std::remove_pointer_t<decltype(out)>>{out});
})
