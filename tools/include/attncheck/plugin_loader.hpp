// Loading an attention implementation through plugin ABI v1.
#pragma once

#include <cstdint>
#include <string>

#include "attncheck/plugin.h"

namespace attncheck {

// A loaded implementation: its name and its entry points.
struct Plugin {
  std::string name;                                       // "builtin" or the library's path
  int32_t (*forward_f32)(const attncheck_problem*) = nullptr;
  int32_t (*forward_f64)(const attncheck_problem*) = nullptr;  // null when the plugin has none
};

// "builtin" gives the built-in implementation linked into this program; anything else is a
// shared library's path, opened with dlopen and checked for attncheck_abi_version() == 1 and
// attncheck_forward_f32. Throws std::runtime_error with a one-line reason otherwise.
Plugin load_plugin(const std::string& which);

}  // namespace attncheck
