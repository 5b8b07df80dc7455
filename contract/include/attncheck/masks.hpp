// Mask converters between attncheck's polarity (true = may attend, as PyTorch SDPA and CS336 2025)
// and nn.MultiheadAttention's (true = blocked).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace attncheck {

// Flips a bool mask of any shape between the two polarities; it is its own inverse.
std::vector<uint8_t> flip_polarity(const std::vector<uint8_t>& mask);

// MultiheadAttention's key_padding_mask [B,Tk] (true = padded key, blocked) as an allow
// mask [B,Tq,Tk] (true = may attend), the same for every query.
std::vector<uint8_t> allow_from_key_padding_mask(const std::vector<uint8_t>& key_padding_mask, int64_t B, int64_t Tq, int64_t Tk);

}  // namespace attncheck
