// The built-in dropout's random stream: Philox4x32-10 (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC 2011), counter-based as PyTorch's and FlashAttention's are, so that every
// weight's draw depends on the seed and its own index alone, whatever the order or the tiling.
#pragma once

#include <array>
#include <cstdint>

#include "attncheck/contract.hpp"

namespace attncheck {

// Philox4x32 with 10 rounds: the four 32-bit words of block `counter` under `key`.
inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57, kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kMul0) * counter[0], p1 = uint64_t(kMul1) * counter[2];
    counter = {uint32_t(p1 >> 32) ^ counter[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ counter[3] ^ key[1], uint32_t(p0)};
    key = {key[0] + kWeyl0, key[1] + kWeyl1};
  }
  return counter;
}

// Whether the element at `index` of a stream under `seed` is kept at rate p: its uniform draw
// u in [0, 1), Philox's first word at counter = index and key = seed, is at least p.
inline bool philox_keeps(uint64_t seed, double p, uint64_t index) {
  const uint32_t word = philox4x32({uint32_t(index), uint32_t(index >> 32), 0, 0}, {uint32_t(seed), uint32_t(seed >> 32)})[0];
  return double(word) * 0x1p-32 >= p;
}

// Whether dropout keeps weight (b, h, i, j) of `problem`: the draw at its index among the
// [B,H,Tq,Tk] weights.
template <class T>
bool dropout_keeps(const Problem<T>& problem, int64_t b, int64_t h, int64_t i, int64_t j) {
  return philox_keeps(problem.dropout_seed, problem.dropout_p, uint64_t(problem.shape.scores_at(b, h, i) + j));
}

// The keep decision for weight (b, h, i, j): the problem's given mask (dropout_keep) when it has
// one, else the Philox draw.
template <class T>
bool kept(const Problem<T>& problem, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (problem.dropout_keep) return problem.dropout_keep[problem.shape.scores_at(b, h, i) + j] != 0;
  return dropout_keeps(problem, b, h, i, j);
}

}  // namespace attncheck
