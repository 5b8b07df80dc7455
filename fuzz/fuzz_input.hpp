// How the fuzz targets read their inputs: every choice goes through attncheck's Chooser, so the
// generator behind the property suite and the sweeps (draw_case) also decodes fuzz inputs, and
// make_seeds can write an input by recording the choices that lead to it. The byte format of
// each target is in docs/fuzzing.md ("Reading an input"). A failure is kept as text instead, the
// input's exact bits, so that it outlives the generator ("Kept texts" below).
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <istream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
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
  static constexpr const char* target = "fuzz_softmax";
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
  static constexpr const char* target = "fuzz_attention";
  Case<T> c;
  int64_t b = 0, i = 0;
  std::vector<T> poison;  // [Tk]: written over every head's k_j and v_j for each key j query (b, i) may not see
};

// The shapes fuzz_attention draws: B and H up to 2, Tq and Tk up to 8, dk and dv up to 8; every
// feature but the KV-end causal mask, whose extra choice would give the corpus's inputs (choices,
// not bits) other cases than those they were kept for.
inline const CaseLimits kAttentionLimits{2, 2, 8, 8, 1, 1, false, ~uint32_t(ATTNCHECK_CAP_KV_CACHE)};

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

// Kept texts: a numeric target's input as the exact bits of its values, which mean the same input
// whatever draw_case and the readers above become (bytes would not). Format version 1, one item a
// line, values as hexadecimal bit patterns (Precision<T>::to_bits):
//   attncheck-fuzz 1 fuzz_attention
//   case float32 1 ... end             (the case: case_to_text's lines)
//   intervention b 0 i 1               (the poisoned query)
//   poison 00000000 7fc00000           ([Tk]: overwrites key j in every head where query i may not see it)
// or
//   attncheck-fuzz 1 fuzz_softmax
//   row float32 empty-rows zero
//   logits 3f800000 ff800000           ([Tk])
//   allow 1 0                          ([Tk]; 0 = forbidden)
template <class T>
std::string kept_text(const AttentionInput<T>& in);
template <class T>
std::string kept_text(const SoftmaxRow<T>& row);

// Whether an input is a kept text (it starts "attncheck-fuzz "), not bytes for a BytesChooser.
bool is_kept_text(const uint8_t* data, size_t size);

// A numeric target's LLVMFuzzerTestOneInput: test(data, size) on bytes; a kept text is the replay
// program's, and skipped here (saying so once) by code without coverage, so that libFuzzer keeps
// no input that starts like one: ci/fuzz hands it the kept texts, and their mutations, malformed
// texts, would reach the corpus, where the replay program rejects them (clang 14's libFuzzer keeps
// an input with coverage of its own whatever it returns; -1 asks later ones not to).
int test_one_input(const uint8_t* data, size_t size, const char* target, int (*test)(const uint8_t*, size_t));

// A kept text of Input's target (AttentionInput or SoftmaxRow), all of `in`. Throws
// std::runtime_error with a one-line reason when it is malformed or kept for another target.
template <template <class> class Input>
std::variant<Input<float>, Input<double>> read_kept(std::istream& in);

// use(input) on the input a kept text holds: 0; or -1, with the reason in *error when error is not
// null, when the text is malformed (and use is not called).
template <template <class> class Input, class Use>
int with_kept(const uint8_t* data, size_t size, std::string* error, Use use);

// What a target's AttncheckFuzzKeep does: the kept text of `data` in *text, a libFuzzer input
// decoded by decode(chooser, use), or a kept text read and written again (so that `--keep` on a
// kept text round-trips it). 0, or -1 and the reason in *error for a malformed kept text.
template <template <class> class Input, class Decode>
int keep(const uint8_t* data, size_t size, std::string* text, std::string* error, Decode decode);

// Whether $ATTNCHECK_FUZZ_SHOW is set (read once): the targets then print each input as they read
// it, as describe() shows a case (docs/fuzzing.md, "Reading an input").
bool showing();

// A failure: prints "FINDING: " and `what` (which should say what broke and show the input as a
// person reads it) and aborts, so libFuzzer saves the input and the replay program exits non-zero.
[[noreturn]] void finding(const std::string& what);

template <template <class> class Input, class Use>
int with_kept(const uint8_t* data, size_t size, std::string* error, Use use) {
  std::variant<Input<float>, Input<double>> input;
  try {
    std::istringstream text(std::string(reinterpret_cast<const char*>(data), size));
    input = read_kept<Input>(text);
  } catch (const std::runtime_error& e) {  // the reading's only; a failure in use() is not a malformed text
    if (error) *error = e.what();
    return -1;
  }
  std::visit(use, input);
  return 0;
}

template <template <class> class Input, class Decode>
int keep(const uint8_t* data, size_t size, std::string* text, std::string* error, Decode decode) {
  auto write = [&](const auto& input) { *text = kept_text(input); };
  if (is_kept_text(data, size)) return with_kept<Input>(data, size, error, write);
  BytesChooser choose(data, size);
  decode(choose, write);
  return 0;
}

}  // namespace attncheck::fuzz

// The entry points of a numeric target for its kept texts, defined beside LLVMFuzzerTestOneInput
// (fuzz_npy has none: a .npy input means the same file whatever the generator). Both return 0, or
// -1 with a one-line reason in *error (when not null) for a malformed kept text or one of another
// target. AttncheckFuzzReplayKept checks the input a kept text holds, as LLVMFuzzerTestOneInput
// checks bytes (a failure aborts); AttncheckFuzzKeep writes the kept text of an input, bytes or a
// kept text, into *text.
extern "C" int AttncheckFuzzReplayKept(const uint8_t* data, size_t size, std::string* error);
extern "C" int AttncheckFuzzKeep(const uint8_t* data, size_t size, std::string* text, std::string* error);

// Defines a numeric target's entry points: libFuzzer's LLVMFuzzerTestOneInput (bytes decoded by
// DECODE(chooser, use), each input checked by CHECK), and the replay program's two for kept texts
// of INPUT (AttentionInput, SoftmaxRow). CHECK and DECODE are objects in attncheck::fuzz.
#define ATTNCHECK_FUZZ_TARGET(INPUT, CHECK, DECODE)                                                           \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {                                   \
    using namespace attncheck::fuzz;                                                                          \
    return test_one_input(data, size, INPUT<float>::target, [](const uint8_t* bytes, size_t count) {          \
      BytesChooser choose(bytes, count);                                                                      \
      DECODE(choose, CHECK);                                                                                  \
      return 0;                                                                                               \
    });                                                                                                       \
  }                                                                                                           \
  extern "C" int AttncheckFuzzReplayKept(const uint8_t* data, size_t size, std::string* error) {              \
    return attncheck::fuzz::with_kept<attncheck::fuzz::INPUT>(data, size, error, attncheck::fuzz::CHECK);     \
  }                                                                                                           \
  extern "C" int AttncheckFuzzKeep(const uint8_t* data, size_t size, std::string* text, std::string* error) { \
    return attncheck::fuzz::keep<attncheck::fuzz::INPUT>(data, size, text, error, attncheck::fuzz::DECODE);   \
  }
