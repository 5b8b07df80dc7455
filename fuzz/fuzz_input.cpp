#include "fuzz_input.hpp"

#include "attncheck/precision.hpp"

#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>

namespace attncheck::fuzz {
namespace {

// Logits that break softmax kernels: infinities and NaN, the finite mask sentinels (-FLT_MAX,
// +-1e4, +-1e9), the edge of float exp's range (ln FLT_MAX = 88.72, ln of the smallest subnormal
// = -103.3), T's own extremes, the smallest normal and subnormal, and signed zeros.
template <class T>
T special_logit(Chooser& choose) {
  using limits = std::numeric_limits<T>;
  const T picks[] = {limits::infinity(), -limits::infinity(), limits::quiet_NaN(), -limits::quiet_NaN(),
                     -FLT_MAX, FLT_MAX, -1e4f, 1e4f, -1e9f, 1e9f, 88.72f, 88.73f, -103.3f, -104, 1e30f, -1e30f,
                     limits::max(), limits::lowest(), limits::min(), limits::denorm_min(), -limits::denorm_min(),
                     T(0), -T(0)};
  return picks[choose.below(std::size(picks))];
}

// Any bit pattern of T: every NaN payload, both infinities, subnormals, both zeros.
template <class T>
T arbitrary_bits(Chooser& choose) {
  using Bits = typename Precision<T>::Bits;
  const uint64_t most = std::numeric_limits<Bits>::max();  // below(most + 1), without overflow for 64 bits
  return Precision<T>::from_bits(Bits(choose.below(most == std::numeric_limits<uint64_t>::max() ? most : most + 1)));
}

}  // namespace

template <class T>
SoftmaxRow<T> draw_softmax_row(Chooser& choose) {
  // Out: logits and allow [Tk], Tk = 1..kMaxSoftmaxLength.
  SoftmaxRow<T> row;
  row.empty = choose.below(2) == 1 ? EmptyRows::nan : EmptyRows::zero;
  const auto n = size_t(1 + choose.below(kMaxSoftmaxLength));
  row.logits.resize(n);
  row.allow.resize(n);
  for (size_t j = 0; j < n; ++j) {
    row.allow[j] = choose.below(2) == 0;
    switch (choose.below(3)) {
      case 0: row.logits[j] = T(int(choose.below(9)) - 4); break;
      case 1: row.logits[j] = special_logit<T>(choose); break;
      default: row.logits[j] = arbitrary_bits<T>(choose);
    }
  }
  return row;
}

template <class T>
AttentionInput<T> draw_attention_input(Chooser& choose, const CaseLimits& limits) {
  // Out: the case's Q [B,H,Tq,dk], K [B,H,Tk,dk], V [B,H,Tk,dv] and masks, and poison [Tk].
  AttentionInput<T> in;
  in.c = draw_case<T>(choose, limits);
  const Shape& s = in.c.shape;
  in.b = int64_t(choose.below(uint64_t(s.B)));
  in.i = int64_t(choose.below(uint64_t(s.Tq)));
  const T poisons[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                       -std::numeric_limits<T>::infinity(), T(1e30), T(-1e30)};
  in.poison.assign(size_t(s.Tk), T(0));
  for (int64_t j = 0; j < s.Tk; ++j)
    if (!in.c.permits(in.b, in.i, j)) in.poison[size_t(j)] = poisons[choose.below(std::size(poisons))];
  return in;
}

bool showing() {
  static const bool show_inputs = std::getenv("ATTNCHECK_FUZZ_SHOW") != nullptr;
  return show_inputs;
}

void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

template SoftmaxRow<float> draw_softmax_row(Chooser&);
template SoftmaxRow<double> draw_softmax_row(Chooser&);
template AttentionInput<float> draw_attention_input(Chooser&, const CaseLimits&);
template AttentionInput<double> draw_attention_input(Chooser&, const CaseLimits&);

}  // namespace attncheck::fuzz
