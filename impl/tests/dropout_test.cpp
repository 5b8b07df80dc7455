// The built-in dropout: Philox4x32-10 against Random123's known answers, and the contract's order
// (softmax over every permitted key, then each weight kept and divided by 1 - p, or 0) on a case
// worked by hand.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "attncheck/attention.hpp"
#include "attncheck/dropout.hpp"

namespace attncheck {
namespace {

// Random123 1.14, kat_vectors: philox4x32 10 rounds, counter then key, then the expected words.
TEST(Philox, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}), (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// One query, four equal scores (q = 0): every weight 1/4 before dropout; at p = 0.5 a kept one is
// 1/2, and V = I reads each off the output. The mask given (as PyTorch's math backend takes one)
// is applied as it is, and written back.
TEST(Dropout, KeptWeightsAreDividedByOneMinusPAndDroppedOnesAreZero) {
  const std::vector<float> q = {0}, k = {1, 1, 1, 1}, v = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  const std::vector<uint8_t> given = {1, 0, 0, 1};
  Problem<float> p;
  p.shape = {.B = 1, .H = 1, .Tq = 1, .Tk = 4, .dk = 1, .dv = 4};
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.dropout_p = 0.5;
  p.dropout_keep = given.data();
  std::vector<float> out(4), lse(1);
  std::vector<uint8_t> keep(4, 7);
  attention(p, Result<float>{out.data(), nullptr, lse.data(), keep.data()});
  EXPECT_EQ(out, (std::vector<float>{0.5f, 0, 0, 0.5f}));
  EXPECT_EQ(keep, given);
  EXPECT_FLOAT_EQ(lse[0], std::log(4.0f));  // the weights' before dropout
}

// Without a given mask the Philox draws decide, the same for the same seed, and a fraction near
// 1 - p of 4096 weights survives (Hoeffding: within 0.05 but with probability 2e-9).
TEST(Dropout, PhiloxDrawsRepeatForASeedAndKeepOneMinusP) {
  Problem<float> p;
  p.shape = {.B = 1, .H = 1, .Tq = 64, .Tk = 64, .dk = 1, .dv = 1};
  p.dropout_p = 0.25;
  p.dropout_seed = 42;
  int64_t kept = 0;
  for (int64_t i = 0; i < 64; ++i)
    for (int64_t j = 0; j < 64; ++j) kept += dropout_keeps(p, 0, 0, i, j);
  EXPECT_NEAR(double(kept) / 4096, 0.75, 0.05);
  EXPECT_EQ(dropout_keeps(p, 0, 0, 3, 5), dropout_keeps(p, 0, 0, 3, 5));
}

}  // namespace
}  // namespace attncheck
