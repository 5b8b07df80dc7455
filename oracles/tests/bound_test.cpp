// The bound's two promises: no correct implementation ever exceeds it (nor trips the precision
// gate), and planted errors do. ATTNCHECK_SWEEP_CASES sets the sweep's size (docs/error-bound.md
// records a run of 10^5); ATTNCHECK_SWEEP_SEED its seed.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "attncheck/abi.hpp"
#include "attncheck/attention.hpp"
#include "attncheck/cases.hpp"
#include "attncheck/compare.hpp"
#include "attncheck/oracle.hpp"
#include "variant.hpp"

namespace attncheck {
namespace {

int64_t env_or(const char* name, int64_t fallback) {
  const char* text = std::getenv(name);
  return text && *text ? std::strtoll(text, nullptr, 10) : fallback;
}

// A variant's out [B,H,Tq,dv], and its lse [B,H,Tq] and dropout keep mask [B,H,Tq,Tk] into `lse`
// and `keep` if given.
template <class T>
std::vector<T> run_variant(const Case<T>& c, const Variant& v, std::vector<T>* lse = nullptr,
                           std::vector<uint8_t>* keep = nullptr) {
  std::vector<T> out(size_t(c.shape.out_size()));
  if (lse) lse->resize(size_t(c.shape.lse_size()));
  if (keep) keep->assign(size_t(c.shape.scores_size()), 0xFF);
  variant_attention(c.problem(), out.data(), v, lse ? lse->data() : nullptr, keep ? keep->data() : nullptr);
  return out;
}

// The built-in implementation's out [B,H,Tq,dv], and its lse [B,H,Tq] and keep mask [B,H,Tq,Tk]
// into `lse` and `keep` if given.
template <class T>
std::vector<T> run_builtin(const Case<T>& c, std::vector<T>* lse = nullptr, std::vector<uint8_t>* keep = nullptr) {
  std::vector<T> out(size_t(c.shape.out_size()));
  if (lse) lse->resize(size_t(c.shape.lse_size()));
  if (keep) keep->assign(size_t(c.shape.scores_size()), 0xFF);
  attention(c.problem(), Result<T>{out.data(), nullptr, lse ? lse->data() : nullptr, keep ? keep->data() : nullptr});
  return out;
}

// Cases of one format (float for f32, f16 and bf16; double for f64), every correct kernel on each;
// with `dropout`, their inputs made finite and dropout at a drawn rate and seed, judged for the
// built-in's keep mask, which every variant must draw alike (the same Philox stream); with `sinks`,
// a sink per head (draw_sink).
template <class T>
void sweep(int64_t cases, Format format = Precision<T>::format, bool dropout = false, bool sinks = false) {
  const char* precision = Arithmetic::of(format).label;
  const uint64_t seed = uint64_t(env_or("ATTNCHECK_SWEEP_SEED", 20261129));
  SeededChooser choose(seed);
  CaseLimits limits;
  limits.capabilities = ~kFormatCapabilities | capability_of(format);
  const std::vector<NamedVariant>& correct = correct_variants();
  const size_t kKernels = correct.size() + 1;  // the variants, then the built-in
  std::vector<double> worst_ratio(kKernels), worst_gate(kKernels);
  std::vector<std::string> worst_where(kKernels);
  int64_t unchecked = 0, checked = 0;
  std::vector<double> worst_lse(kKernels);  // every kernel returns its log-sum-exp too
  for (int64_t n = 0; n < cases; ++n) {
    Case<T> c = draw_case<T>(choose, limits);
    if (dropout) {
      c = with_finite_inputs(std::move(c));
      c.dropout_p = (const double[]){0.5, 0.25, 0.75, 0.1, 0.9}[choose.below(5)];
      c.dropout_seed = choose.below(uint64_t(1) << 32);
    }
    if (sinks) {
      c.sinks.resize(size_t(c.shape.H));
      for (float& sink : c.sinks) sink = draw_sink(choose);
    }
    std::vector<T> plain_lse, lse;
    std::vector<uint8_t> plain_keep, keep;
    const std::vector<T> plain = run_builtin(c, &plain_lse, dropout ? &plain_keep : nullptr);
    Problem<T> problem = c.problem();
    problem.dropout_keep = dropout ? plain_keep.data() : nullptr;
    const Reference ref = reference(problem);
    for (size_t kernel = 0; kernel < kKernels; ++kernel) {
      const bool is_builtin = kernel == correct.size();
      const char* name = is_builtin ? "built-in" : correct[kernel].name;
      const std::vector<T> out = is_builtin ? plain : run_variant(c, correct[kernel].variant, &lse, dropout ? &keep : nullptr);
      if (dropout && !is_builtin) {
        ASSERT_EQ(keep, plain_keep) << name << " drew another dropout mask, case " << n;
      }
      const Verdict verdict = judge(out.data(), plain.data(), ref.out);
      ASSERT_TRUE(verdict.ok()) << name << ", case " << n << " (seed " << seed << ", " << c.mix << ")\n" << verdict.report();
      const Verdict lse_verdict = judge(is_builtin ? plain_lse.data() : lse.data(), plain_lse.data(), ref.lse);
      ASSERT_TRUE(lse_verdict.ok()) << name << " lse, case " << n << " (seed " << seed << ", " << c.mix << ")\n"
                                    << lse_verdict.report();
      worst_lse[kernel] = std::max(worst_lse[kernel], lse_verdict.bound.worst_ratio);
      const Comparison& result = verdict.bound;
      const PrecisionGate& gate = verdict.precision;
      if (result.worst_ratio > worst_ratio[kernel]) {
        worst_ratio[kernel] = result.worst_ratio;
        const Mismatch& w = result.worst;
        worst_where[kernel] = "case " + std::to_string(n) + " " + w.where() + ", " + c.mix;
      }
      worst_gate[kernel] = std::max(worst_gate[kernel], gate.kernel / gate.limit);
      if (is_builtin) {
        unchecked += result.unchecked;
        checked += result.checked;
      }
    }
  }
  std::printf("%s, %lld cases (seed %llu), %lld outputs checked, %lld outside the range:\n", precision, (long long)cases,
              (unsigned long long)seed, (long long)checked, (long long)unchecked);
  for (size_t kernel = 0; kernel < kKernels; ++kernel)
    std::printf("  %-45s largest error/bound %.3g (%s), largest loss/limit %.3g; lse %.3g\n",
                kernel < correct.size() ? correct[kernel].name : "built-in", worst_ratio[kernel], worst_where[kernel].c_str(),
                worst_gate[kernel], worst_lse[kernel]);
}

TEST(Bound, NeverExceededByCorrectFloatKernels) { sweep<float>(env_or("ATTNCHECK_SWEEP_CASES", 1500)); }

TEST(Bound, NeverExceededByCorrectDoubleKernels) { sweep<double>(env_or("ATTNCHECK_SWEEP_CASES", 500)); }

// f16 and bf16 inputs, float arithmetic, output (and with round_weights the weights) in the format.
TEST(Bound, NeverExceededByCorrectHalfKernels) { sweep<float>(env_or("ATTNCHECK_SWEEP_CASES", 1000), Format::f16); }

TEST(Bound, NeverExceededByCorrectBFloat16Kernels) { sweep<float>(env_or("ATTNCHECK_SWEEP_CASES", 1000), Format::bf16); }

// Dropout (docs/error-bound.md, "Dropout"): the kept weights rescaled, in float, f16 and bf16, where
// a kernel that rounds P rounds it once more.
TEST(Bound, NeverExceededByCorrectFloatKernelsWithDropout) {
  sweep<float>(env_or("ATTNCHECK_SWEEP_CASES", 300), Format::f32, true);
}
TEST(Bound, NeverExceededByCorrectHalfKernelsWithDropout) {
  sweep<float>(env_or("ATTNCHECK_SWEEP_CASES", 300), Format::f16, true);
}
TEST(Bound, NeverExceededByCorrectBFloat16KernelsWithDropout) {
  sweep<float>(env_or("ATTNCHECK_SWEEP_CASES", 300), Format::bf16, true);
}

// Sinks (docs/error-bound.md, "Sinks"): one more term of the normalizer, no value.
TEST(Bound, NeverExceededByCorrectFloatKernelsWithSinks) {
  sweep<float>(env_or("ATTNCHECK_SWEEP_CASES", 300), Format::f32, false, true);
}
TEST(Bound, NeverExceededByCorrectDoubleKernelsWithSinks) {
  sweep<double>(env_or("ATTNCHECK_SWEEP_CASES", 200), Format::f64, false, true);
}
TEST(Bound, NeverExceededByCorrectHalfKernelsWithSinks) {
  sweep<float>(env_or("ATTNCHECK_SWEEP_CASES", 300), Format::f16, false, true);
}
TEST(Bound, NeverExceededByCorrectBFloat16KernelsWithSinks) {
  sweep<float>(env_or("ATTNCHECK_SWEEP_CASES", 300), Format::bf16, false, true);
}

// Plain cases where every planted error must show: B 1, H 2, Tq 6, Tk 10, normal q and k, and
// values in [1, 3] so that no output is small by cancellation.
Case<float> plain_case(uint64_t seed, Causal causal = Causal::none) {
  SeededChooser choose(seed);
  Case<float> c;
  c.shape = {1, 2, 6, 10, 16, 8};
  c.causal = causal;
  auto normal = [&] {
    return float(std::sqrt(-2 * std::log(1 - (choose.below(1u << 30) + 0.5) / 0x1p30)) *
                 std::cos(2 * M_PI * choose.below(1u << 30) / 0x1p30));
  };
  for (auto* x : {&c.q, &c.k}) {
    x->resize(size_t(2 * (x == &c.q ? 6 : 10) * 16));
    for (float& e : *x) e = normal();
  }
  c.v.resize(2 * 10 * 8);
  for (float& e : c.v) e = 1 + float(choose.below(1000)) / 500;
  return c;
}

// Whether the rigorous bound, or else the precision gate, catches the variant on case c.
std::string caught_by(const Case<float>& c, const Variant& v) {
  const Reference ref = reference(c.problem());
  const std::vector<float> out = run_variant(c, v), plain = run_builtin(c);
  const Verdict verdict = judge(out.data(), plain.data(), ref.out);
  return !verdict.bound.ok() ? "bound" : !verdict.precision.ok() ? "gate" : "neither";
}

TEST(Bound, ExceededByPlantedErrors) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    EXPECT_EQ(caught_by(plain_case(seed), {.mutation = Mutation::element_off_1e3}), "bound") << seed;
    EXPECT_EQ(caught_by(plain_case(seed), {.mutation = Mutation::model_width_scale}), "bound") << seed;
    EXPECT_EQ(caught_by(plain_case(seed), {.mutation = Mutation::nan_element}), "bound") << seed;
    EXPECT_EQ(caught_by(plain_case(seed, Causal::upper_left), {.mutation = Mutation::causal_swapped}), "bound") << seed;
  }
}

// The log-sum-exp's real bugs (docs/error-bound.md, "The log-sum-exp"): a natural-log LSE
// multiplied by ln 2 again (pytorch 181645), a base-2 LSE returned (flashinfer 2114), and 0
// instead of -inf for a fully masked row (pytorch 134650); and NaN there, which the out tensor's
// rule for infinities would let pass. Each is wrong by the bound, named lse.
TEST(Bound, LseExceededByPlantedErrors) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    Case<float> c = plain_case(seed);
    c.allow.assign(size_t(c.shape.allow_size()), 1);
    std::fill_n(c.allow.begin(), c.shape.Tk, uint8_t(0));  // query 0 sees nothing
    const Reference ref = reference(c.problem());
    std::vector<float> lse;
    run_builtin(c, &lse);
    ASSERT_TRUE(compare(lse.data(), ref.lse).ok()) << seed;
    std::vector<float> times_ln2 = lse, base_2 = lse, empty_zero = lse, empty_nan = lse;
    for (size_t n = 1; n < lse.size(); ++n) {  // n = 0 is the empty row, -inf in all three
      times_ln2[n] = float(lse[n] * M_LN2);
      base_2[n] = float(lse[n] / M_LN2);
    }
    empty_zero[0] = 0;
    empty_nan[0] = std::numeric_limits<float>::quiet_NaN();
    for (const std::vector<float>* wrong : {&times_ln2, &base_2, &empty_zero, &empty_nan}) {
      const Comparison result = compare(wrong->data(), ref.lse);
      EXPECT_FALSE(result.ok()) << seed;
      EXPECT_NE(result.report("float32").find("lse[0,"), std::string::npos) << result.report("float32");
    }
  }
}

TEST(PrecisionGate, CatchesPrecisionLossTheBoundAllows) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    EXPECT_NE(caught_by(plain_case(seed), {.mutation = Mutation::bf16_weights}), "neither") << seed;
    EXPECT_NE(caught_by(plain_case(seed), {.mutation = Mutation::approx_exp}), "neither") << seed;
  }
}

// A correct kernel run with denormals-are-zero (what -ffast-math's crtfastmath.o and CUDA's
// --use_fast_math set) reads a subnormal q as 0: on q = the largest float subnormal, k = [1e34, 0],
// v = [1, 0] it gives 0.5 where the exact output is 0.5000294. The bound's flush terms allow it,
// and so must the precision gate's natural unit (it once called this a loss of 986 units).
TEST(PrecisionGate, FlushedSubnormalInputsAreNoLoss) {
  const Case<float> c = flushed_subnormal_case();
  const Reference ref = reference(c.problem());
  ASSERT_NEAR(double(ref.out.exact[0]), 0.5000294, 1e-7);
  const std::vector<float> flushed = run_variant(c, {.flush_subnormals = true}), plain = run_builtin(c);
  EXPECT_EQ(flushed[0], 0.5f);
  const Verdict verdict = judge(flushed.data(), plain.data(), ref.out);
  EXPECT_TRUE(verdict.ok()) << verdict.report();
  // The flush terms cover a flushed q, not an arbitrary error of that size: 0.4999 is wrong.
  const float off = 0.4999f;
  EXPECT_FALSE(judge(&off, plain.data(), ref.out).bound.ok());
}

}  // namespace
}  // namespace attncheck
