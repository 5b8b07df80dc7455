#include "attncheck/kernel.hpp"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "attncheck/abi.hpp"
#include "attncheck/attention.hpp"

namespace attncheck {

CaseLimits Kernel::limits(CaseLimits base) const {
  base.abi_only |= !full_contract;
  return base;
}

Kernel load_kernel(const std::string& which) {
  Kernel kernel{load_plugin(which)};
  kernel.full_contract = which == "builtin";
  return kernel;
}

const Kernel& kernel_from_environment() {
  static const Kernel kernel = [] {
    const char* which = std::getenv("ATTNCHECK_IMPL");
    try {
      Kernel loaded = load_kernel(which && *which ? which : "builtin");
      std::fprintf(stderr, "attncheck: checking %s\n", loaded.plugin.name.c_str());
      return loaded;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "attncheck: %s\n", e.what());
      std::exit(2);
    }
  }();
  return kernel;
}

template <class T>
int32_t run_kernel(const Kernel& kernel, const Case<T>& c, std::vector<T>& out) {
  const Shape& s = c.shape;
  out.assign(size_t(s.B * s.H * s.Tq * s.dv), std::numeric_limits<T>::quiet_NaN());  // unwritten outputs fail
  const Problem<T> problem = c.problem();
  if (kernel.full_contract) {
    attention(problem, Result<T>{out.data()});
    return 0;
  }
  const auto forward = sizeof(T) == 4 ? kernel.plugin.forward_f32 : kernel.plugin.forward_f64;
  if (!forward) return -1;
  std::vector<uint8_t> allow;
  const attncheck_problem abi = to_abi(problem, out.data(), allow);
  return forward(&abi);
}

template int32_t run_kernel(const Kernel&, const Case<float>&, std::vector<float>&);
template int32_t run_kernel(const Kernel&, const Case<double>&, std::vector<double>&);

}  // namespace attncheck
