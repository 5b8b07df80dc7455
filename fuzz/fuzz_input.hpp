// How the fuzz targets read their inputs: every choice goes through attncheck's Chooser, so the
// generator behind the property suite and the sweeps (draw_case) also decodes fuzz inputs, and
// make_seeds can write an input by recording the choices that lead to it. The byte format of
// each target is in docs/fuzzing.md ("Reading an input").
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "attncheck/cases.hpp"

namespace attncheck::fuzz {

// Choices from a fuzzer's input. below(n) reads the fewest bytes that hold n - 1 from the END of
// the input backwards, the first byte read the most significant, and takes the value modulo n
// (FuzzedDataProvider's integer order); an exhausted input gives 0, the simplest choice.
struct BytesChooser : Chooser {
  BytesChooser(const uint8_t* data, size_t size) : bytes(data, size) {}
  uint64_t below(uint64_t n) override { return n <= 1 ? 0 : bytes.ConsumeIntegralInRange<uint64_t>(0, n - 1); }
  FuzzedDataProvider bytes;
};

// fuzz_softmax's row: logits [Tk] and which of them may be attended.
template <class T>
struct SoftmaxRow {
  EmptyRows empty = EmptyRows::zero;
  std::vector<T> logits;       // [Tk]
  std::vector<uint8_t> allow;  // [Tk]; 0 = forbidden
  // Whether entry j may carry weight: allowed and not -inf (the contract forbids both).
  bool permitted(size_t j) const { return allow[j] && logits[j] != -std::numeric_limits<T>::infinity(); }
};

// At most this many logits in a row.
constexpr int64_t kMaxSoftmaxLength = 16;

// Per entry: forbidden or not, then a small integer (ties), a special value (+-inf, NaN,
// -FLT_MAX, +-1e4, the exp overflow edge, subnormals...) or an arbitrary bit pattern.
template <class T>
SoftmaxRow<T> draw_softmax_row(Chooser& choose);

// fuzz_attention's input: a case, and the query i of batch b whose forbidden keys are poisoned.
template <class T>
struct AttentionInput {
  Case<T> c;
  int64_t b = 0, i = 0;
  std::vector<T> poison;  // [Tk]: written over every head's k_j and v_j for each key j query (b, i) may not see
};

// The shapes fuzz_attention draws: B and H up to 2, Tq and Tk up to 8, dk and dv up to 8.
inline const CaseLimits kAttentionLimits{2, 2, 8, 8};

// draw_case, then b, i, and one poison (NaN, +-inf, +-1e30) per forbidden key of that query.
template <class T>
AttentionInput<T> draw_attention_input(Chooser& choose, const CaseLimits& limits);

// Every numeric target's first choice is the precision: use(x) gets a float row or case, or a
// double one (only when `doubles`, e.g. when the kernel under test has a double entry point).
template <class Use>
void read_softmax_input(Chooser& choose, Use use) {
  if (choose.below(2) == 1) return use(draw_softmax_row<double>(choose));
  use(draw_softmax_row<float>(choose));
}
template <class Use>
void read_attention_input(Chooser& choose, const CaseLimits& limits, bool doubles, Use use) {
  if (choose.below(2) == 1 && doubles) return use(draw_attention_input<double>(choose, limits));
  use(draw_attention_input<float>(choose, limits));
}

// Whether $ATTNCHECK_FUZZ_SHOW is set (read once): the targets then print each input as they read
// it, as describe() shows a case (docs/fuzzing.md, "Reading an input").
bool showing();


// A failure: prints "FINDING: " and `what` (which should say what broke and show the input as a
// person reads it) and aborts, so libFuzzer saves the input and the replay program exits non-zero.
[[noreturn]] void finding(const std::string& what);

}  // namespace attncheck::fuzz
