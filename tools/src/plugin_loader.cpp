#include "attncheck/plugin_loader.hpp"

#include <dlfcn.h>

#include <stdexcept>

namespace attncheck {

Plugin load_plugin(const std::string& which) {
  if (which == "builtin") return {"builtin", &attncheck_forward_f32, &attncheck_forward_f64};

  // The handle is never closed: a plugin's code must stay mapped for the whole run.
  void* handle = dlopen(which.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw std::runtime_error("cannot load plugin: " + std::string(dlerror()));
  auto version = reinterpret_cast<int32_t (*)()>(dlsym(handle, "attncheck_abi_version"));
  if (!version) throw std::runtime_error(which + ": no attncheck_abi_version symbol (is it an attncheck plugin?)");
  if (const int32_t v = version(); v != ATTNCHECK_ABI_VERSION)
    throw std::runtime_error(which + ": ABI version " + std::to_string(v) + ", this attncheck speaks version " +
                             std::to_string(ATTNCHECK_ABI_VERSION));
  Plugin plugin{which};
  plugin.forward_f32 = reinterpret_cast<decltype(plugin.forward_f32)>(dlsym(handle, "attncheck_forward_f32"));
  plugin.forward_f64 = reinterpret_cast<decltype(plugin.forward_f64)>(dlsym(handle, "attncheck_forward_f64"));
  if (!plugin.forward_f32) throw std::runtime_error(which + ": no attncheck_forward_f32 symbol (it is required)");
  return plugin;
}

}  // namespace attncheck
