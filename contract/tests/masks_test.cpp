// Mask polarity: attncheck's allow (true = may attend) against MultiheadAttention's (true = blocked).
#include <gtest/gtest.h>

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
  EXPECT_EQ(allow_from_key_padding_mask(key_padding_mask, 2, 2, 3),
            (std::vector<uint8_t>{1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1}));
}

}  // namespace
}  // namespace attncheck
