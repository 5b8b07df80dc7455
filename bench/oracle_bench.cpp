// How long the oracle takes to check a problem (reference(): exact outputs and bounds, every row)
// on 1 or 2 threads, against a plain double-precision reference on the same problem (the textbook
// loops: scores, maximum, exp and sum, weighted sum) and the built-in float implementation.
// Run: build/bench/oracle_bench; figures in docs/performance.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
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

// Args: H, T, d, threads.
void BM_OracleReference(benchmark::State& state) {
  const Inputs in(state.range(0), state.range(1), state.range(2));
  setenv("ATTNCHECK_THREADS", std::to_string(state.range(3)).c_str(), 1);
  const std::vector<uint8_t> every_row(size_t(in.shape.lse_size()), 1);
  for (auto _ : state) benchmark::DoNotOptimize(reference(in.problem, &every_row));
  unsetenv("ATTNCHECK_THREADS");
  state.counters["outputs/s"] = benchmark::Counter(double(in.out.size()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_OracleReference)
    ->Args({1, 64, 64, 1})
    ->Args({8, 512, 64, 1})
    ->Args({8, 512, 64, 2})
    ->Args({2, 2048, 128, 1})
    ->Args({2, 2048, 128, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The plain double-precision reference, one thread: what the oracle's time is measured against.
void BM_PlainDoubleReference(benchmark::State& state) {
  const Inputs in(state.range(0), state.range(1), state.range(2));
  const Shape& s = in.shape;
  std::vector<double> out(in.out.size()), score(size_t(s.Tk));
  for (auto _ : state) {
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        const float* q_i = in.q.data() + s.q_at(0, h, i);
        double m = -INFINITY, l = 0;
        for (int64_t j = 0; j <= i; ++j) {  // causal
          const float* k_j = in.k.data() + s.k_at(0, h, j);
          double dot = 0;
          for (int64_t c = 0; c < s.dk; ++c) dot += double(q_i[c]) * double(k_j[c]);
          score[size_t(j)] = dot / std::sqrt(double(s.dk));
          m = std::max(m, score[size_t(j)]);
        }
        double* o = out.data() + s.out_at(0, h, i);
        std::fill(o, o + s.dv, 0.0);
        for (int64_t j = 0; j <= i; ++j) {
          const double e = std::exp(score[size_t(j)] - m);
          l += e;
          const float* v_j = in.v.data() + s.v_at(0, h, j);
          for (int64_t c = 0; c < s.dv; ++c) o[c] += e * double(v_j[c]);
        }
        for (int64_t c = 0; c < s.dv; ++c) o[c] /= l;
      }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["outputs/s"] = benchmark::Counter(double(in.out.size()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PlainDoubleReference)
    ->Args({1, 64, 64})
    ->Args({8, 512, 64})
    ->Args({2, 2048, 128})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_BuiltinAttention(benchmark::State& state) {
  Inputs in(state.range(0), state.range(1), state.range(2));
  for (auto _ : state) attention(in.problem, Result<float>{in.out.data()});
  state.counters["outputs/s"] = benchmark::Counter(double(in.out.size()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_BuiltinAttention)
    ->Args({1, 64, 64})
    ->Args({8, 512, 64})
    ->Args({2, 2048, 128})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace attncheck

BENCHMARK_MAIN();
