// Claim: the allow mask means "may attend" (PyTorch SDPA, CS336 2025): an all-true mask equals no
// mask; MultiheadAttention's key_padding_mask (true = blocked) converts to it by flipping, and the
// flip round-trips.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "attncheck/masks.hpp"
#include "attncheck/property_support.hpp"

namespace attncheck {

RC_GTEST_PROP(Property, AllTrueMaskEqualsNoMask, ()) {
  Case<float> c = draw<float>();
  c.allow.clear();
  const Reference no_mask = reference(c.problem());
  c.allow.assign(size_t(c.shape.B * c.shape.Tq * c.shape.Tk), 1);
  require_agreement(c, run_kernel(c), no_mask, "an all-true allow mask against no mask");
}

RC_GTEST_PROP(Property, KeyPaddingMaskConvertsByFlipping, ()) {
  Case<float> c = draw<float>();
  const Shape& s = c.shape;
  std::vector<uint8_t> key_padding_mask(size_t(s.B * s.Tk));  // true = padded, blocked
  for (uint8_t& blocked : key_padding_mask) blocked = *rc::gen::arbitrary<bool>();
  RC_ASSERT(flip_polarity(flip_polarity(key_padding_mask)) == key_padding_mask);
  c.allow = allow_from_key_padding_mask(key_padding_mask, s.B, s.Tq, s.Tk);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < s.Tq; ++i)
      for (int64_t j = 0; j < s.Tk; ++j)
        RC_ASSERT(c.allow[size_t((b * s.Tq + i) * s.Tk + j)] == !key_padding_mask[size_t(b * s.Tk + j)]);
  // The converted mask against the same padding as key lengths, where padded keys come last.
  require_agreement(c, run_kernel(c), reference(c.problem()), "a converted key_padding_mask");
}

}  // namespace attncheck
