// What the bridge costs (`check --impl-cmd`): one IsolatedKernel::run round trip (the problem sent,
// the result received) on small float32 cases, through the plugin host with the built-in
// implementation (the baseline), a Python child that does no attention work (bench/null_child.py:
// the protocol and the Python client alone) and the NumPy kernel examples/python/student_numpy.py.
// Each child is started once, outside the timed loop. Python is /usr/bin/python3 (NumPy).
// Run: taskset -c 0 build/bench/bridge_bench; figures in docs/performance.md.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "attncheck/cases.hpp"
#include "attncheck/isolated_kernel.hpp"

#ifndef ATTNCHECK_SOURCE_DIR
#error "bench/CMakeLists.txt defines ATTNCHECK_SOURCE_DIR, the source tree holding the Python children"
#endif

namespace attncheck {
namespace {

const std::string kPython = "/usr/bin/python3";
const std::string kSource = ATTNCHECK_SOURCE_DIR;

// A causal float32 case [1,H,T,d] (B 1, H_kv = H, Tq = Tk = T, dk = dv = d): q [B,H,Tq,dk],
// k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv] uniform in [-2, 2), as oracle_bench's.
Case<float> causal_case(int64_t H, int64_t T, int64_t d) {
  Case<float> c;
  c.shape = Shape{1, H, T, T, d, d};
  std::mt19937_64 rng(1);
  for (auto* x : {&c.q, &c.k, &c.v}) {
    x->resize(size_t(H * T * d));
    for (float& e : *x) e = float(double(rng() >> 11) * 0x1p-53 * 4 - 2);
  }
  c.causal = Causal::upper_left;
  c.mix = "bridge_bench";
  return c;
}

// Times kernel.run on the case of state's args (H, T, d): q [B,H,Tq,dk], k [B,H_kv,Tk,dk],
// v [B,H_kv,Tk,dv] sent and out [B,H,Tq,dv] received, per iteration; B 1, H_kv = H.
void round_trips(benchmark::State& state, const std::string& which, bool command) {
  const Case<float> c = causal_case(state.range(0), state.range(1), state.range(2));
  IsolatedKernel kernel(which, 30, command);
  try {
    kernel.start();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  std::vector<float> out;
  for (auto _ : state) {
    const Outcome outcome = kernel.run(c, out);
    if (outcome.kind != Outcome::ok) {
      state.SkipWithError(("the child failed: " + outcome.detail + " " + kernel.take_stderr()).c_str());
      break;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["round trips/s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}

// The plugin host with the built-in implementation: q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv]
// in, out [B,H,Tq,dv] back.
void BM_BuiltinHost(benchmark::State& state) { round_trips(state, "builtin", false); }

// bench/null_child.py: q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv] in, zeros out [B,H,Tq,dv]
// back; no attention computed.
void BM_PythonNullChild(benchmark::State& state) { round_trips(state, kPython + " " + kSource + "/bench/null_child.py", true); }

// examples/python/student_numpy.py: q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv] in, out
// [B,H,Tq,dv] back, computed in NumPy.
void BM_PythonNumpyChild(benchmark::State& state) {
  round_trips(state, kPython + " " + kSource + "/examples/python/student_numpy.py", true);
}

// Args: H (= H_kv), T (= Tq = Tk), d (= dk = dv); B 1: [B,H,Tq,dk] [1,2,8,16] and [1,4,64,64].
void sizes(benchmark::internal::Benchmark* b) {
  b->Args({2, 8, 16})->Args({4, 64, 64})->ArgNames({"H", "T", "d"})->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK(BM_BuiltinHost)->Apply(sizes);
BENCHMARK(BM_PythonNullChild)->Apply(sizes);
BENCHMARK(BM_PythonNumpyChild)->Apply(sizes);

}  // namespace
}  // namespace attncheck

BENCHMARK_MAIN();
