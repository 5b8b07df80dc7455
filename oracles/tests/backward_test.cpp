// The backward oracle's exact gradients: the softmax Jacobian on Understanding Deep Learning's
// problem 12.4, and agreement with finite differences of the exact forward.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attncheck/backward.hpp"
#include "attncheck/cases.hpp"

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

}  // namespace
}  // namespace attncheck
