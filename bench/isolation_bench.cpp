// What running the implementation in a child process costs: the same cases run in-process and
// through IsolatedKernel, with and without the oracle's check that a campaign adds to each.
// Run: build/bench/isolation_bench; figures in docs/checking.md.
#include <benchmark/benchmark.h>

#include "attncheck/compare.hpp"
#include "attncheck/isolated_kernel.hpp"
#include "attncheck/kernel.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck {
namespace {

// 64 cases from the generator, as the campaign draws them (ABI only).
const std::vector<Case<float>>& cases() {
  static const std::vector<Case<float>> all = [] {
    SeededChooser choose(3);
    std::vector<Case<float>> c;
    for (int n = 0; n < 64; ++n) c.push_back(draw_case<float>(choose, CaseLimits{.abi_only = true}));
    return c;
  }();
  return all;
}

void BM_InProcess(benchmark::State& state) {
  const Kernel kernel = load_kernel("builtin");
  std::vector<float> out;
  size_t n = 0;
  for (auto _ : state) {
    const Case<float>& c = cases()[n++ % cases().size()];
    run_kernel(kernel, c, out);
    if (state.range(0)) benchmark::DoNotOptimize(compare(out.data(), reference(c.problem()).out));
  }
  state.counters["cases/s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_InProcess)->Arg(0)->Arg(1)->ArgName("with_oracle")->UseRealTime();

void BM_Isolated(benchmark::State& state) {
  IsolatedKernel kernel("builtin", 5);
  kernel.start();
  std::vector<float> out;
  size_t n = 0;
  for (auto _ : state) {
    const Case<float>& c = cases()[n++ % cases().size()];
    kernel.run(c, out);
    if (state.range(0)) benchmark::DoNotOptimize(compare(out.data(), reference(c.problem()).out));
  }
  state.counters["cases/s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Isolated)->Arg(0)->Arg(1)->ArgName("with_oracle")->UseRealTime();

}  // namespace
}  // namespace attncheck

BENCHMARK_MAIN();
