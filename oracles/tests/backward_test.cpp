// The backward oracle's exact gradients: the softmax Jacobian on Understanding Deep Learning's
// problem 12.4, and agreement with finite differences of the exact forward.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <cstdio>
#include <cstdlib>
#include <string>

#ifdef __SSE__
#include <xmmintrin.h>
#endif

#include "attncheck/abi.hpp"
#include "attncheck/attention_backward.hpp"
#include "attncheck/backward.hpp"
#include "attncheck/cases.hpp"
#include "attncheck/compare.hpp"
#include "backward.hpp"

namespace attncheck {
namespace {

// One query over the logits [-3, 1, 100, 5, -1] (q = 1, k = the logits, scale 1) with V = I, so
// that dK_j = dS_j = p_j (dO_j - sum_k p_k dO_k): for dO = e_c, row c of the softmax's Jacobian
// J_cj = p_c (delta_cj - p_j). A saturated softmax: its gradients vanish.
TEST(Backward, JacobianOfUdlProblem12_4) {
  Case<float> c;
  c.shape = {1, 1, 1, 5, 1, 5};
  c.q = {1};
  c.k = {-3, 1, 100, 5, -1};
  c.scale = 1;
  c = with_identity_values(c);
  const double p[5] = {1.852116770e-45, 1.011221493e-43, 1 - 5.637741939e-42, 5.521082277e-42, 1.368539471e-44};
  long double frobenius = 0;
  for (int row = 0; row < 5; ++row) {
    std::vector<float> dout(5, 0);
    dout[size_t(row)] = 1;
    const GradReference<float> g = reference_backward(c.problem(), dout.data());
    long double sum = 0;
    for (int j = 0; j < 5; ++j) {
      const long double J = g.dk.exact[size_t(j)];
      sum += J;
      frobenius += J * J;
      if (row == j && j != 2) {
        EXPECT_NEAR(double(J) / p[j], 1.0, 1e-9) << "diagonal " << j;  // p (1 - p) = p
      }
      if (row == 2 && j != 2) {
        EXPECT_NEAR(double(J) / -p[j], 1.0, 1e-9) << "J_2" << j;  // -p_2 p_j = -p_j
      }
      EXPECT_TRUE(std::isfinite(g.dk.bound[size_t(j)]));
    }
    EXPECT_LE(std::fabs(double(sum)), 1e-60) << "row " << row << " sums to " << double(sum);
  }
  EXPECT_NEAR(double(std::sqrt(frobenius)) / 1.11e-41, 1.0, 0.01);
}

// L = sum_ic dO_ic out_ic: dL/dx for every input x of a small double problem with GQA, a mask, a
// window and a soft-cap, against central differences of the oracle's exact forward.
TEST(Backward, ExactGradientsAreTheForwardsDerivative) {
  SeededChooser choose(5);
  Case<double> c;
  c.shape = {1, 4, 3, 5, 3, 2, 2};  // B 1, H 4 over H_kv 2, Tq 3, Tk 5, dk 3, dv 2
  for (std::vector<double>* x : {&c.q, &c.k, &c.v}) {
    x->resize(size_t(x == &c.q ? c.shape.q_size() : x == &c.k ? c.shape.k_size() : c.shape.v_size()));
    for (double& e : *x) e = standard_normal(choose);
  }
  c.allow = {1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0};  // the last query sees nothing
  c.window_left = 3;
  c.softcap = 2;
  std::vector<double> dout(size_t(c.shape.out_size()));
  for (double& e : dout) e = standard_normal(choose);
  const GradReference<double> g = reference_backward(c.problem(), dout.data());
  auto loss = [&](const Case<double>& x) {
    const Reference r = reference(x.problem());
    long double total = 0;
    for (size_t n = 0; n < dout.size(); ++n) total += dout[n] * r.out.exact[n];
    return total;
  };
  const std::pair<std::vector<double> Case<double>::*, const ExactTensor*> inputs[] = {
      {&Case<double>::q, &g.dq}, {&Case<double>::k, &g.dk}, {&Case<double>::v, &g.dv}};
  for (const auto& [member, tensor] : inputs)
    for (size_t n = 0; n < (c.*member).size(); ++n) {
      const double h = 1e-5;
      Case<double> up = c, down = c;
      (up.*member)[n] += h;
      (down.*member)[n] -= h;
      const double difference = double((loss(up) - loss(down)) / (2 * h));
      EXPECT_NEAR(double(tensor->exact[n]), difference, 1e-8) << tensor->name << "[" << n << "]";
    }
  for (int64_t k = 0; k < c.shape.dk; ++k) EXPECT_EQ(g.dq.exact[size_t(c.shape.q_at(0, 0, 2) + k)], 0) << "an empty row";
}

int64_t env_or(const char* name, int64_t fallback) {
  const char* text = std::getenv(name);
  return text && *text ? std::strtoll(text, nullptr, 10) : fallback;
}

// One backward's gradients: the built-in's (variant null) or a variant's, on the given out and lse.
template <class T>
struct Computed {
  std::vector<T> dq, dk, dv;
};
// With `flush`, under flush-to-zero and denormals-are-zero (x86-64 MXCSR), as a kernel built with
// -ffast-math or run under CUDA's --use_fast_math computes.
template <class T>
Computed<T> run_backward(const Case<T>& c, const GradReference<T>& ref, const std::vector<T>& dout,
                         const BackwardVariant* variant, bool flush = false) {
  const Shape& s = c.shape;
  Computed<T> g{std::vector<T>(size_t(s.q_size())), std::vector<T>(size_t(s.k_size())), std::vector<T>(size_t(s.v_size()))};
  const Grads<T> grads{ref.out.data(), ref.lse.data(), dout.data(), g.dq.data(), g.dk.data(), g.dv.data()};
#ifdef __SSE__
  const unsigned saved = _mm_getcsr();
  if (flush) _mm_setcsr(saved | (1u << 15) | (1u << 6));  // FTZ, DAZ
#endif
  if (variant)
    variant_backward(c.problem(), grads, *variant);
  else
    attention_backward(c.problem(), grads);
#ifdef __SSE__
  _mm_setcsr(saved);
#endif
  return g;
}

// Cases of one format, every correct backward on each: none outside the bound or the precision
// gate. ATTNCHECK_SWEEP_CASES sets the number (docs/error-bound.md, "Gradients", records 10^5).
template <class T>
void sweep(int64_t cases, Format format = Precision<T>::format) {
  const uint64_t seed = uint64_t(env_or("ATTNCHECK_SWEEP_SEED", 20261130));
  SeededChooser choose(seed);
  CaseLimits limits;
  limits.capabilities = ~kFormatCapabilities | capability_of(format);
  limits.abi_only = true;  // the backward's contract has the zero empty-row policy only
  const std::vector<NamedBackward>& correct = correct_backward_variants();
  const size_t kernels = correct.size() + 2;  // the variants, the built-in, FlashAttention-2's flushing subnormals
  std::vector<double> worst(kernels, 0), worst_gate(kernels, 0);
  std::vector<std::string> where(kernels);
  auto name = [&](size_t kernel) {
    return std::string(kernel < correct.size()    ? correct[kernel].name
                       : kernel == correct.size() ? "built-in"
                                                  : "flash_backward_flush_subnormals");
  };
  int64_t checked = 0, unchecked = 0;
  for (int64_t n = 0; n < cases; ++n) {
    const Case<T> c = draw_case<T>(choose, limits);
    std::vector<T> dout(size_t(c.shape.out_size()));
    for (T& x : dout) x = T(round_to(c.format, standard_normal(choose)));
    const GradReference<T> ref = reference_backward(c.problem(), dout.data());
    const Computed<T> plain = run_backward<T>(c, ref, dout, nullptr);
    for (size_t kernel = 0; kernel < kernels; ++kernel) {
      const bool builtin = kernel == correct.size(), flushing = kernel > correct.size();
      const Computed<T> g = builtin    ? plain
                            : flushing ? run_backward<T>(c, ref, dout, &correct[1].variant, true)
                                       : run_backward<T>(c, ref, dout, &correct[kernel].variant);
      const std::pair<const std::vector<T>*, std::pair<const std::vector<T>*, const ExactTensor*>> tensors[] = {
          {&g.dq, {&plain.dq, &ref.dq}}, {&g.dk, {&plain.dk, &ref.dk}}, {&g.dv, {&plain.dv, &ref.dv}}};
      for (const auto& [computed, expected] : tensors) {
        const Verdict verdict = judge(computed->data(), expected.first->data(), *expected.second);
        ASSERT_TRUE(verdict.ok()) << name(kernel) << ", case " << n << " (seed " << seed << ", " << c.mix << ")\n"
                                  << verdict.report() << describe(c);
        if (verdict.bound.worst_ratio > worst[kernel]) {
          worst[kernel] = verdict.bound.worst_ratio;
          where[kernel] = "case " + std::to_string(n) + " " + verdict.bound.worst.where() + ", " + c.mix;
        }
        worst_gate[kernel] = std::max(worst_gate[kernel], verdict.precision.kernel / verdict.precision.limit);
        if (builtin) {
          checked += verdict.bound.checked;
          unchecked += verdict.bound.unchecked;
        }
      }
    }
  }
  std::printf("%s, %lld cases (seed %llu), %lld gradient elements checked, %lld not checked:\n", Arithmetic::of(format).label,
              (long long)cases, (unsigned long long)seed, (long long)checked, (long long)unchecked);
  for (size_t kernel = 0; kernel < kernels; ++kernel)
    std::printf("  %-32s largest error/bound %.3g (%s), largest loss/limit %.3g\n", name(kernel).c_str(), worst[kernel],
                where[kernel].c_str(), worst_gate[kernel]);
}

TEST(BackwardBound, NeverExceededByCorrectFloatBackwards) { sweep<float>(env_or("ATTNCHECK_SWEEP_CASES", 500)); }
TEST(BackwardBound, NeverExceededByCorrectDoubleBackwards) { sweep<double>(env_or("ATTNCHECK_SWEEP_CASES", 300)); }
TEST(BackwardBound, NeverExceededByCorrectHalfBackwards) { sweep<float>(env_or("ATTNCHECK_SWEEP_CASES", 300), Format::f16); }
TEST(BackwardBound, NeverExceededByCorrectBFloat16Backwards) { sweep<float>(env_or("ATTNCHECK_SWEEP_CASES", 300), Format::bf16); }

// Every planted backward bug leaves the bound (or the precision gate) on one of the first float
// cases drawn; how many cases it took is printed.
TEST(BackwardBound, ExceededByEveryPlantedBug) {
  for (int mutation = 1; mutation <= int(BackwardMutation::always_causal); ++mutation) {
    const BackwardVariant buggy = backward_mutant(BackwardMutation(mutation));
    SeededChooser choose(7);
    CaseLimits limits;
    limits.capabilities = ~kFormatCapabilities | ATTNCHECK_CAP_F32;
    limits.abi_only = true;
    int64_t found = -1;
    for (int64_t n = 0; n < 300 && found < 0; ++n) {
      const Case<float> c = draw_case<float>(choose, limits);
      std::vector<float> dout(size_t(c.shape.out_size()));
      for (float& x : dout) x = float(standard_normal(choose));
      const GradReference<float> ref = reference_backward(c.problem(), dout.data());
      const Computed<float> plain = run_backward<float>(c, ref, dout, nullptr), g = run_backward<float>(c, ref, dout, &buggy);
      if (!judge(g.dq.data(), plain.dq.data(), ref.dq).ok() || !judge(g.dk.data(), plain.dk.data(), ref.dk).ok() ||
          !judge(g.dv.data(), plain.dv.data(), ref.dv).ok())
        found = n;
    }
    EXPECT_GE(found, 0) << "backward mutation " << mutation << " survived 300 cases";
    std::printf("backward mutation %d: caught at case %lld\n", mutation, (long long)found);
  }
}

}  // namespace
}  // namespace attncheck
