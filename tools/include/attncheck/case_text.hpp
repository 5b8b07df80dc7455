// A case as text, every tensor as the exact bits of its values: what a kept counterexample holds,
// so that it means the same case whatever the generator (draw_case) becomes. Format version 1, one
// item a line, tensors as hexadecimal bit patterns of the case's format in their [B,H,...] order:
//   case float32 1
//   shape B 1 H 1 H_kv 1 Tq 1 Tk 2 dk 2 dv 1
//   options causal none scale 0x0p+0 empty-rows zero
//   window 2 0               (only with a sliding window: left right, -1 unbounded)
//   softcap 0x1.ep+4         (only with a soft-cap)
//   mix qk ties, v normal
//   q 3f800000 00000000
//   k 41200000 00000000 00000000 00000000
//   v 3f800000 40000000
//   allow 0 1                (only with an allow mask [B,Tq,Tk])
//   key-lengths 2            (only with key lengths [B])
//   bias ...                 (only with a bias [B,H,Tq,Tk])
//   end
#pragma once

#include <istream>
#include <optional>
#include <sstream>
#include <string>

#include "attncheck/cases.hpp"

namespace attncheck {

// x's bit pattern in hexadecimal, every digit written ("3f800000" for 1.0f): how a kept case (and a
// kept fuzz input) writes a value, so that it outlives any generator.
template <class T>
std::string hex_bits(T x);
// The value whose bits `word` spells, exactly as hex_bits writes them (hexadecimal digits alone, at
// most 2 per byte of T); nothing when it is not such a word.
template <class T>
std::optional<T> from_hex(const std::string& word);

template <class T>
std::string case_to_text(const Case<T>& c);

// The precision word of a case text's first line ("float32", "float64", "float16", "bfloat16"), or
// "" when `first_line` does not open a case.
std::string case_text_precision(const std::string& first_line);

// Whether case_from_text<T> reads the case `first_line` opens: T's own format, or for float also
// float16 and bfloat16 (whose values are written in their own bits, 4 hex digits).
template <class T>
bool case_text_holds(const std::string& first_line);

// Reads the lines after `first_line` (a "case ..." line) up to "end" from `in`. Throws
// std::runtime_error with a one-line reason on anything malformed: an unknown version, a shape
// out of range, a tensor of the wrong length, a bit pattern that is not hexadecimal.
template <class T>
Case<T> case_from_text(const std::string& first_line, std::istream& in);

// A whole case text (case_to_text's) read as the Case<float> or Case<double> it holds, handed to
// f: what f returns (the same type for both). Throws as case_from_text does.
template <class F>
auto visit_case_text(const std::string& text, F&& f) {
  std::istringstream in(text);
  std::string first;
  std::getline(in, first);
  return case_text_holds<double>(first) ? f(case_from_text<double>(first, in)) : f(case_from_text<float>(first, in));
}

}  // namespace attncheck
