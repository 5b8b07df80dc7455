// Claim: the allow mask means "may attend" (PyTorch SDPA, CS336 2025), so MultiheadAttention's
// key_padding_mask (true = blocked) converts to it by flipping, entry by entry for every query, and
// the flip round-trips.

#include "attncheck/masks.hpp"
#include "attncheck/property.hpp"

namespace attncheck::properties {

ATTNCHECK_PROPERTY(KeyPaddingMaskConvertsByFlipping, .order = 150, .catches = "inverted_polarity", .needs = ATTNCHECK_CAP_ALLOW) {
  Case<float> c = check.draw<float>();
  const Shape& s = c.shape;
  std::vector<uint8_t> key_padding_mask(size_t(s.B * s.Tk));  // true = padded, blocked
  for (uint8_t& blocked : key_padding_mask) blocked = check.coin();
  ATTNCHECK_REQUIRE(check, flip_polarity(flip_polarity(key_padding_mask)) == key_padding_mask,
                    "flip_polarity does not round-trip");
  c.allow = allow_from_key_padding_mask(key_padding_mask, s.B, s.Tq, s.Tk);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < s.Tq; ++i)
      for (int64_t j = 0; j < s.Tk; ++j)
        ATTNCHECK_REQUIRE(check, c.allow[size_t(s.allow_at(b, i) + j)] == !key_padding_mask[size_t(b * s.Tk + j)],
                          "allow_from_key_padding_mask does not flip the polarity");
  // And the kernel, given the converted mask, agrees with the oracle under it.
  require_agreement(check, c, check.run(c), reference(c.problem()), "a converted key_padding_mask");
}

}  // namespace attncheck::properties
