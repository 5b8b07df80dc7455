#include "attncheck/masks.hpp"

namespace attncheck {

std::vector<uint8_t> flip_polarity(const std::vector<uint8_t>& mask) {
  // mask: any shape, one byte per entry.
  std::vector<uint8_t> flipped(mask.size());
  for (size_t n = 0; n < mask.size(); ++n) flipped[n] = mask[n] ? 0 : 1;
  return flipped;
}

std::vector<uint8_t> allow_from_key_padding_mask(const std::vector<uint8_t>& key_padding_mask, int64_t B, int64_t Tq,
                                                 int64_t Tk) {
  // key_padding_mask [B,Tk] in, allow [B,Tq,Tk] out.
  std::vector<uint8_t> allow(size_t(B * Tq * Tk));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Tq; ++i)
      for (int64_t j = 0; j < Tk; ++j) allow[(b * Tq + i) * Tk + j] = key_padding_mask[b * Tk + j] ? 0 : 1;
  return allow;
}

}  // namespace attncheck
