#include "attncheck/plugin_loader.hpp"

#include "attncheck/features.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <stdexcept>

namespace attncheck {
namespace {

// The restrictions and limits a library exports, if any; a domain it cannot keep is a load error.
Domain exported_domain(void* handle, const std::string& which, uint32_t capabilities) {
  Domain domain;
  auto restrictions = reinterpret_cast<uint32_t (*)()>(dlsym(handle, "attncheck_restrictions"));
  if (!restrictions) return domain;
  domain.restrictions = restrictions();
  if (domain.only(ATTNCHECK_ONLY_WITHIN_LIMITS)) {
    auto limits = reinterpret_cast<void (*)(attncheck_limits*)>(dlsym(handle, "attncheck_limits_v2"));
    if (!limits)
      throw std::runtime_error(which + ": restricts itself to ATTNCHECK_ONLY_WITHIN_LIMITS without attncheck_limits_v2");
    attncheck_limits given{};
    given.size = int32_t(sizeof given);
    limits(&given);
    domain.limits = limits_from_abi(given);
  }
  if (const std::string why = domain_error(domain, capabilities); !why.empty())
    throw std::runtime_error(which + ": attncheck_restrictions declares " + why);
  return domain;
}

}  // namespace

Plugin load_plugin(const std::string& which) {
  if (which == "builtin")
    return {"builtin",
            2,
            attncheck_capabilities(),
            nullptr,
            nullptr,
            &attncheck_forward_v2,
            &attncheck_backward_v2,
            &attncheck_mha_forward_v2};

  // A path that names an existing file is that file: dlopen would search the library path for a
  // name without a slash ("my.so"), and miss the one right here.
  const std::string path = which.find('/') == std::string::npos && access(which.c_str(), F_OK) == 0 ? "./" + which : which;
  // The handle is never closed: a plugin's code must stay mapped for the whole run.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw std::runtime_error("cannot load plugin: " + std::string(dlerror()));
  auto version = reinterpret_cast<int32_t (*)()>(dlsym(handle, "attncheck_abi_version"));
  if (!version) throw std::runtime_error(which + ": no attncheck_abi_version symbol (is it an attncheck plugin?)");
  Plugin plugin{which, version()};
  if (plugin.version == ATTNCHECK_ABI_VERSION) {
    plugin.forward_f32 = reinterpret_cast<decltype(plugin.forward_f32)>(dlsym(handle, "attncheck_forward_f32"));
    plugin.forward_f64 = reinterpret_cast<decltype(plugin.forward_f64)>(dlsym(handle, "attncheck_forward_f64"));
    if (!plugin.forward_f32) throw std::runtime_error(which + ": no attncheck_forward_f32 symbol (it is required)");
    plugin.capabilities = kAbiV1Capabilities | (plugin.forward_f64 ? uint32_t(ATTNCHECK_CAP_F64) : 0u);
    plugin.domain = exported_domain(handle, which, plugin.capabilities);
    return plugin;
  }
  if (plugin.version == ATTNCHECK_ABI_VERSION_2) {
    auto capabilities = reinterpret_cast<uint32_t (*)()>(dlsym(handle, "attncheck_capabilities"));
    plugin.forward_v2 = reinterpret_cast<decltype(plugin.forward_v2)>(dlsym(handle, "attncheck_forward_v2"));
    plugin.mha_v2 = reinterpret_cast<decltype(plugin.mha_v2)>(dlsym(handle, "attncheck_mha_forward_v2"));
    if (!capabilities) throw std::runtime_error(which + ": ABI version 2 without attncheck_capabilities");
    plugin.capabilities = capabilities() & ~kLayerOnly;
    if ((plugin.capabilities & ATTNCHECK_CAP_MHA) && !plugin.mha_v2)
      throw std::runtime_error(which + ": claims ATTNCHECK_CAP_MHA without attncheck_mha_forward_v2");
    if (!plugin.forward_v2 && !(plugin.capabilities & ATTNCHECK_CAP_MHA))
      throw std::runtime_error(
          which + ": ABI version 2 without attncheck_forward_v2 (or ATTNCHECK_CAP_MHA and attncheck_mha_forward_v2)");
    if (!plugin.forward_v2) plugin.capabilities |= kLayerOnly;
    plugin.backward_v2 = reinterpret_cast<decltype(plugin.backward_v2)>(dlsym(handle, "attncheck_backward_v2"));
    if ((plugin.capabilities & ATTNCHECK_CAP_BACKWARD) && !plugin.backward_v2)
      throw std::runtime_error(which + ": claims ATTNCHECK_CAP_BACKWARD without attncheck_backward_v2");
    if (!(plugin.capabilities & (ATTNCHECK_CAP_F32 | ATTNCHECK_CAP_F64 | ATTNCHECK_CAP_F16 | ATTNCHECK_CAP_BF16)))
      throw std::runtime_error(which + ": claims no format (f32, f64, f16 or bf16)");
    plugin.domain = exported_domain(handle, which, plugin.capabilities);
    return plugin;
  }
  throw std::runtime_error(which + ": ABI version " + std::to_string(plugin.version) +
                           ", this attncheck speaks versions 1 and 2");
}

}  // namespace attncheck
