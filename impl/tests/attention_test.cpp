// The built-in attention on the course examples: shapes, mask combinations and empty rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "attncheck/attention.hpp"

namespace attncheck {
namespace {

// Deterministic values in [-2, 2): fixed seed, and no std distribution (theirs differ by library).
std::vector<float> tensor(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> x(n);
  for (float& e : x) e = float(double(rng() >> 11) * 0x1p-53 * 4 - 2);
  return x;
}

// A problem of shape s over q, k, v, with the given masks.
struct Case {
  Shape s;
  std::vector<float> q, k, v;
  explicit Case(Shape shape)
      : s(shape), q(tensor(size_t(s.q_size()), 1)), k(tensor(size_t(s.k_size()), 2)), v(tensor(size_t(s.v_size()), 3)) {}
  Problem<float> problem(Masks masks = {}) const {
    Problem<float> p;
    p.shape = s;
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.masks = masks;
    return p;
  }
};

// Runs attention; returns weights [B,H,Tq,Tk] and fills out [B,H,Tq,dv].
std::vector<float> run(const Problem<float>& p, std::vector<float>& out) {
  const Shape& s = p.shape;
  std::vector<float> weights(size_t(s.scores_size()));
  out.assign(size_t(s.out_size()), 0);
  attention(p, Result<float>{out.data(), weights.data()});
  return weights;
}

TEST(Attention, ShapesOfScoresAndOutput) {
  // Q [2,3,4], K [2,5,4], V [2,5,6] give weights [2,3,5] and output [2,3,6]: B 2, H 1.
  const Case c({2, 1, 3, 5, 4, 6});
  const float sentinel = 12345;
  std::vector<float> out(2 * 3 * 6 + 8, sentinel), weights(2 * 3 * 5 + 8, sentinel);
  attention(c.problem(), Result<float>{out.data(), weights.data()});
  for (size_t n = 0; n < out.size(); ++n) EXPECT_EQ(out[n] == sentinel, n >= 36) << "out[" << n << "]";
  for (size_t n = 0; n < weights.size(); ++n) EXPECT_EQ(weights[n] == sentinel, n >= 30) << "weights[" << n << "]";
  // out[b,i,:] = sum_j weights[b,i,j] v[b,j,:], checked in double.
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int col = 0; col < 6; ++col) {
        double expected = 0;
        for (int j = 0; j < 5; ++j) expected += double(weights[(b * 3 + i) * 5 + j]) * c.v[(b * 5 + j) * 6 + col];
        EXPECT_NEAR(out[(b * 3 + i) * 6 + col], expected, 1e-6);
      }
}

TEST(Attention, CausalAloneDoesNotRemoveAnEarlierPaddedKey) {
  // Tq = Tk = 4, keys 2 and 3 padding. Causal lets query 3 see keys 0..3; only the combination
  // with the key lengths removes the padded ones.
  const Case c({1, 1, 4, 4, 3, 2});
  const int32_t key_lengths[1] = {2};
  std::vector<float> out;
  const auto causal_only = run(c.problem({nullptr, Causal::upper_left, nullptr}), out);
  const auto combined = run(c.problem({nullptr, Causal::upper_left, key_lengths}), out);
  EXPECT_GT(causal_only[3 * 4 + 2], 0.0f);
  EXPECT_GT(causal_only[3 * 4 + 3], 0.0f);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(combined[i * 4 + j] > 0, j <= i && j < 2) << "i " << i << " j " << j;
}

TEST(Attention, CausalAlignmentsDifferWhenTqIsNotTk) {
  // Tq 2, Tk 4: upper-left lets query i see j <= i; lower-right j <= i + 2.
  const Case c({1, 1, 2, 4, 3, 2});
  std::vector<float> out;
  const auto upper_left = run(c.problem({nullptr, Causal::upper_left, nullptr}), out);
  const auto lower_right = run(c.problem({nullptr, Causal::lower_right, nullptr}), out);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(upper_left[i * 4 + j] > 0, j <= i) << "i " << i << " j " << j;
      EXPECT_EQ(lower_right[i * 4 + j] > 0, j <= i + 2) << "i " << i << " j " << j;
    }
}

TEST(Attention, FullyMaskedRowIsZeroAndLeavesOtherRowsUntouched) {
  const Case c({1, 2, 3, 4, 5, 3});
  std::vector<uint8_t> allow(3 * 4, 1);
  const auto all_allowed = c.problem({allow.data()});
  for (int j = 0; j < 4; ++j) allow[1 * 4 + j] = 0;  // query 1 may see nothing
  std::vector<float> out_all, out_masked, lse(2 * 3);
  run(all_allowed, out_all);
  out_masked.assign(out_all.size(), 0);
  attention(c.problem({allow.data()}), Result<float>{out_masked.data(), nullptr, lse.data()});
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(lse[h * 3 + i] == -std::numeric_limits<float>::infinity(), i == 1);
      for (int col = 0; col < 3; ++col) {
        const size_t n = size_t((h * 3 + i) * 3 + col);
        EXPECT_FALSE(std::isnan(out_masked[n]));
        if (i == 1)
          EXPECT_EQ(out_masked[n], 0.0f);
        else
          EXPECT_EQ(out_masked[n], out_all[n]) << "row " << i << " changed";
      }
    }
}

TEST(Attention, FullyMaskedRowIsNanUnderTheNanPolicy) {
  const Case c({1, 1, 2, 3, 2, 2});
  std::vector<uint8_t> allow = {0, 0, 0, 1, 1, 1};
  auto p = c.problem({allow.data()});
  p.empty_rows = EmptyRows::nan;
  std::vector<float> out;
  run(p, out);
  EXPECT_TRUE(std::isnan(out[0]) && std::isnan(out[1]));
  EXPECT_FALSE(std::isnan(out[2]) || std::isnan(out[3]));
}

TEST(Attention, PoisonedForbiddenKeysAndValuesNeverReachTheOutput) {
  // Key 2 padded; its key and value hold NaN, inf and 1e30: valid outputs stay bit-identical.
  Case c({1, 1, 2, 3, 2, 2});
  const int32_t key_lengths[1] = {2};
  std::vector<float> clean, poisoned;
  run(c.problem({nullptr, Causal::none, key_lengths}), clean);
  c.k[2 * 2] = std::numeric_limits<float>::quiet_NaN();
  c.k[2 * 2 + 1] = std::numeric_limits<float>::infinity();
  c.v[2 * 2] = std::numeric_limits<float>::quiet_NaN();
  c.v[2 * 2 + 1] = 1e30f;
  run(c.problem({nullptr, Causal::none, key_lengths}), poisoned);
  for (size_t n = 0; n < clean.size(); ++n) EXPECT_EQ(clean[n], poisoned[n]) << "out[" << n << "]";
}

TEST(Attention, BiasMinusInfForbidsAndFiniteBiasShifts) {
  const Case c({1, 1, 1, 3, 2, 2});
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> bias = {0, -inf, 0.5f}, out;
  auto p = c.problem();
  p.bias = bias.data();
  const auto w = run(p, out);
  EXPECT_EQ(w[1], 0.0f);
  // Key 2's weight over key 0's is exp(s_2 + 0.5 - s_0): the bias adds to the score.
  const auto w_plain = run(c.problem(), out);
  EXPECT_NEAR((w[2] / w[0]) / (w_plain[2] / w_plain[0]), std::exp(0.5), 1e-5);
}

TEST(Attention, DefaultScaleIsOneOverSqrtDkAndExplicitScaleOverrides) {
  const Case c({1, 1, 1, 2, 16, 1});
  std::vector<float> out;
  auto p = c.problem();
  const auto w_default = run(p, out);
  p.scale = 0.25;  // 1/sqrt(16)
  const auto w_explicit = run(p, out);
  EXPECT_EQ(w_default, w_explicit);
  p.scale = 1.0;
  EXPECT_NE(run(p, out), w_default);
}

TEST(Attention, ProblemErrorNamesTheFault) {
  const Case c({1, 1, 1, 1, 1, 1});
  std::vector<float> out(1);
  auto p = c.problem();
  EXPECT_EQ(problem_error(p, Result<float>{out.data()}), "");
  p.shape.Tk = 0;
  EXPECT_NE(problem_error(p, Result<float>{out.data()}).find("Tk = 0"), std::string::npos);
  p.shape.Tk = 1;
  p.masks.causal = Causal(7);
  EXPECT_NE(problem_error(p, Result<float>{out.data()}).find("causal"), std::string::npos);
  p.masks.causal = Causal::none;
  p.shape.B = p.shape.H = p.shape.Tq = p.shape.Tk = 1 << 20;
  EXPECT_NE(problem_error(p, Result<float>{out.data()}).find("2^31"), std::string::npos);
}

}  // namespace
}  // namespace attncheck
