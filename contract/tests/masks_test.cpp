// Mask polarity: attncheck's allow (true = may attend) against MultiheadAttention's (true = blocked).
#include <gtest/gtest.h>

#include "attncheck/contract.hpp"
#include "attncheck/masks.hpp"

namespace attncheck {
namespace {

TEST(Masks, FlipPolarityRoundTrips) {
  const std::vector<uint8_t> blocked = {1, 0, 0, 1, 1, 0};
  EXPECT_EQ(flip_polarity(blocked), (std::vector<uint8_t>{0, 1, 1, 0, 0, 1}));
  EXPECT_EQ(flip_polarity(flip_polarity(blocked)), blocked);
}

TEST(Masks, KeyPaddingMaskTrueMeansBlocked) {
  // B 2, Tk 3: batch 0 pads its last key, batch 1 pads none. Tq 2 repeats each row.
  const std::vector<uint8_t> key_padding_mask = {0, 0, 1, 0, 0, 0};
  EXPECT_EQ(allow_from_key_padding_mask(key_padding_mask, 2, 2, 3), (std::vector<uint8_t>{1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1}));
}

// FlashAttention's window convention: inclusive bounds around the lower-right diagonal i + Tk - Tq.
// Tq 3, Tk 5: query i's diagonal is key i + 2. Each row below lists the keys permits() allows.
TEST(Masks, WindowIsInclusiveAroundTheLowerRightDiagonal) {
  const Shape s{1, 1, 3, 5, 1, 1};
  auto keys = [&](Masks m, int64_t i) {
    std::vector<int64_t> seen;
    for (int64_t j = 0; j < s.Tk; ++j)
      if (permits(m, s, 0, i, j)) seen.push_back(j);
    return seen;
  };
  const Masks left_one{.window_left = 1, .window_right = 0};  // the key on the diagonal and one before
  EXPECT_EQ(keys(left_one, 0), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(keys(left_one, 2), (std::vector<int64_t>{3, 4}));
  const Masks zero{.window_left = 0, .window_right = 0};  // (0, 0) sees exactly one key
  EXPECT_EQ(keys(zero, 1), (std::vector<int64_t>{3}));
  const Masks right_only{.window_left = -1, .window_right = 1};  // unbounded to the left
  EXPECT_EQ(keys(right_only, 0), (std::vector<int64_t>{0, 1, 2, 3}));
  // Upper-left causal (j <= 2) and the window around key 4 (j >= 3) meet nowhere: an empty row, the
  // trap of a window aligned one way and a causal mask the other.
  const Masks crossed{.causal = Causal::upper_left, .window_left = 1, .window_right = 0};
  EXPECT_TRUE(keys(crossed, 2).empty());
  const Masks aligned{.causal = Causal::lower_right, .window_left = 1, .window_right = 0};
  EXPECT_EQ(keys(aligned, 2), (std::vector<int64_t>{3, 4}));
}

}  // namespace
}  // namespace attncheck
