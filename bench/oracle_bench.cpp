// How long the oracle takes to check a problem (reference(): exact outputs and bounds), and the
// built-in implementation for scale. Run: build/bench/oracle_bench; figures in docs/error-bound.md.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "attncheck/attention.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck {
namespace {

// A causal float problem [1,H,T,d] with uniform values in [-2, 2).
struct Inputs {
  Shape shape;
  std::vector<float> q, k, v, out;
  Problem<float> problem;
  Inputs(int64_t H, int64_t T, int64_t d) : shape{1, H, T, T, d, d} {
    std::mt19937_64 rng(1);
    for (auto* x : {&q, &k, &v}) {
      x->resize(size_t(H * T * d));
      for (float& e : *x) e = float(double(rng() >> 11) * 0x1p-53 * 4 - 2);
    }
    out.resize(size_t(H * T * d));
    problem.shape = shape;
    problem.q = q.data();
    problem.k = k.data();
    problem.v = v.data();
    problem.masks.causal = Causal::upper_left;
  }
};

void BM_OracleReference(benchmark::State& state) {
  const Inputs in(state.range(0), state.range(1), state.range(2));
  for (auto _ : state) benchmark::DoNotOptimize(reference(in.problem));
  state.counters["outputs/s"] = benchmark::Counter(double(in.out.size()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_OracleReference)->Args({1, 64, 64})->Args({8, 512, 64})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_BuiltinAttention(benchmark::State& state) {
  Inputs in(state.range(0), state.range(1), state.range(2));
  for (auto _ : state) attention(in.problem, Result<float>{in.out.data()});
  state.counters["outputs/s"] = benchmark::Counter(double(in.out.size()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_BuiltinAttention)->Args({1, 64, 64})->Args({8, 512, 64})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace attncheck

BENCHMARK_MAIN();
