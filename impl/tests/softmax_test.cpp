// The stable softmax on the course examples: overflow, shift invariance, and why -inf forbids.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attncheck/softmax.hpp"

namespace attncheck {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Understanding Deep Learning, problem 12.4: logits [-3, 1, 100, 5, -1]; exact weights to 10 digits.
const double kUdlLogits[5] = {-3, 1, 100, 5, -1};
const double kUdlExact[5] = {1.852116770e-45, 1.011221493e-43, 1 - 5.637741939e-42, 5.521082277e-42, 1.368539471e-44};

TEST(Softmax, NaiveOverflowsInFloatOnUdlProblem12_4) {
  RowMatrix<float> x(1, 5);
  for (int j = 0; j < 5; ++j) x(0, j) = float(kUdlLogits[j]);
  softmax_naive<float>(x, Axis::rows);
  // expf(100) = inf (ln FLT_MAX = 88.72): the sum is inf, inf/inf is NaN and the rest are 0.
  EXPECT_TRUE(std::isnan(x(0, 2)));
  for (int j : {0, 1, 3, 4}) EXPECT_EQ(x(0, j), 0.0f) << "j = " << j;
}

TEST(Softmax, StableMatchesExactWeightsOnUdlProblem12_4InDouble) {
  RowMatrix<double> x(1, 5);
  for (int j = 0; j < 5; ++j) x(0, j) = kUdlLogits[j];
  softmax_stable<double>(x, Axis::rows);
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(x(0, j) / kUdlExact[j], 1.0, 1e-9) << "j = " << j;
}

TEST(Softmax, StableIsFiniteInFloatOnUdlProblem12_4) {
  RowMatrix<float> x(1, 5);
  for (int j = 0; j < 5; ++j) x(0, j) = float(kUdlLogits[j]);
  softmax_stable<float>(x, Axis::rows);
  EXPECT_EQ(x(0, 2), 1.0f);
  // The others are below FLT_MIN: subnormal or flushed, never NaN, never above 1e-41.
  for (int j : {0, 1, 3, 4}) {
    EXPECT_GE(x(0, j), 0.0f) << "j = " << j;
    EXPECT_LE(x(0, j), 1e-41f) << "j = " << j;
  }
}

TEST(Softmax, ColumnsAxisNormalizesEachColumn) {
  // Understanding Deep Learning's D x N layout: column n is example n's logits.
  RowMatrix<double> x(3, 2);
  x << 1, 0, 2, 0, 3, 0;
  softmax_stable<double>(x, Axis::columns);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (int d = 0; d < 3; ++d) {
    EXPECT_NEAR(x(d, 0), std::exp(d + 1.0) / z, 1e-15);
    EXPECT_DOUBLE_EQ(x(d, 1), 1.0 / 3);
  }
}

TEST(Softmax, AddingAConstantToEveryLogitLeavesWeightsUnchanged) {
  // Logits in eighths, so that +1000 is exact in float and the claim can be bit-exact.
  const float logits[6] = {-3.5f, 0.125f, 2.25f, 2.25f, -0.75f, 1.0f};
  RowMatrix<float> x(1, 6), shifted(1, 6);
  for (int j = 0; j < 6; ++j) {
    x(0, j) = logits[j];
    shifted(0, j) = logits[j] + 1000.0f;
  }
  softmax_stable<float>(x, Axis::rows);
  softmax_stable<float>(shifted, Axis::rows);
  for (int j = 0; j < 6; ++j) EXPECT_EQ(x(0, j), shifted(0, j)) << "j = " << j;
}

TEST(Softmax, ForbiddenScoreMustBeMinusInfNotZero) {
  // Key 2 forbidden: -inf gives it weight exactly 0; writing 0 instead leaves it exp(-2)/(...) of the mass.
  RowMatrix<double> with_inf(1, 3), with_zero(1, 3);
  with_inf << 1, 2, -kInf;
  with_zero << 1, 2, 0;
  softmax_stable<double>(with_inf, Axis::rows);
  softmax_stable<double>(with_zero, Axis::rows);
  EXPECT_EQ(with_inf(0, 2), 0.0);
  EXPECT_NEAR(with_zero(0, 2), 1 / (std::exp(1.0) + std::exp(2.0) + 1), 1e-15);
  EXPECT_GT(with_zero(0, 2), 0.09);
}

TEST(Softmax, EmptyLineFollowsPolicy) {
  double zero_row[3] = {-kInf, -kInf, -kInf}, nan_row[3] = {-kInf, -kInf, -kInf};
  EXPECT_EQ(softmax_stable(zero_row, 3, 1, EmptyRows::zero), -kInf);
  EXPECT_TRUE(std::isnan(softmax_stable(nan_row, 3, 1, EmptyRows::nan)));
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(zero_row[j], 0.0);
    EXPECT_TRUE(std::isnan(nan_row[j]));
  }
}

TEST(Softmax, NanAnywhereInALineIsNeverSwallowed) {
  // PyTorch issue 141128: a "safe" softmax returned 0 for a row holding NaN. NaN first, last, or alone.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double rows[3][3] = {{nan, 1, 2}, {1, 2, nan}, {-kInf, nan, -kInf}};
  for (const auto& row : rows) {
    double x[3] = {row[0], row[1], row[2]};
    EXPECT_TRUE(std::isnan(softmax_stable(x, 3, 1, EmptyRows::zero)));
    for (double w : x) EXPECT_TRUE(std::isnan(w));
  }
}

TEST(Softmax, LogSumExpOfRow) {
  double x[3] = {0.5, -1, 2};
  const double lse = softmax_stable(x, 3, 1, EmptyRows::zero);
  EXPECT_NEAR(lse, std::log(std::exp(0.5) + std::exp(-1.0) + std::exp(2.0)), 1e-15);
}

}  // namespace
}  // namespace attncheck
