// Values as literals of the source files attncheck repro writes (C++ and Python): exact, whatever
// they hold (NaN, infinities, f16 and bf16 bit patterns, a quote in a path).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "attncheck/call_schema.hpp"
#include "attncheck/cases.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/precision.hpp"
#include "attncheck/printable.hpp"

namespace attncheck {

inline std::string hex(double x) {
  char text[40];
  std::snprintf(text, sizeof text, "%a", x);
  return text;
}

// An element's bit pattern in its format, as a hex integer (a literal of both languages).
inline std::string bits_literal(double x, Format format) {
  char bits[24];
  switch (format) {
    case Format::f16:
      std::snprintf(bits, sizeof bits, "0x%04x", unsigned(Precision<Half>::to_bits(Precision<Half>::from_double(x))));
      break;
    case Format::bf16:
      std::snprintf(bits, sizeof bits, "0x%04x", unsigned(Precision<BFloat16>::to_bits(Precision<BFloat16>::from_double(x))));
      break;
    case Format::f32:
      std::snprintf(bits, sizeof bits, "0x%08x", unsigned(Precision<float>::to_bits(float(x))));
      break;
    case Format::f64:
      std::snprintf(bits, sizeof bits, "0x%016llx", (unsigned long long)Precision<double>::to_bits(x));
      break;
  }
  return bits;
}

// One element as a literal of the language: C++ (hex floats; NAN, INFINITY) or Python (hex
// strings for float.fromhex); f16 and bf16 as their bit patterns in both.
inline std::string literal(double x, Format format, bool python) {
  if (is_narrow(format)) return bits_literal(x, format);
  if (python) return "'" + hex(x) + "'";
  if (std::isnan(x)) return "NAN";
  if (std::isinf(x)) return x > 0 ? "INFINITY" : "-INFINITY";
  return hex(x) + (format == Format::f32 ? "f" : "");
}

// A string literal of C++ (octal escapes) or Python (hex escapes) holding `text` exactly, whatever
// it holds: a path or command is data, and a quote in it must not end the literal. Bytes past ASCII
// stay as they are (UTF-8 in, UTF-8 out).
inline std::string string_literal(const std::string& text, bool python) {
  std::string quoted = "\"";
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    char escaped[8];
    if (ch == '"' || ch == '\\')
      quoted += std::string("\\") + ch;
    else if (byte < 0x20 || byte == 0x7f)
      quoted += (std::snprintf(escaped, sizeof escaped, python ? "\\x%02x" : "\\%03o", byte), escaped);
    else
      quoted += ch;
  }
  return quoted + "\"";
}

// Text for a comment line of the generated file: one line, however the file or finding spelled it.
inline std::string comment(const std::string& text) { return printable(text, 400); }

template <class V, class F>
std::string joined(const std::vector<V>& values, F each) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) text += (i ? (i % 8 ? ", " : ",\n    ") : "") + each(values[i]);
  return text;
}

// A tensor of the case as literals in its format, and a tensor of the oracle's: its exact values
// (hi + lo, so that a double kernel is held to more than double's rounding of them) and bounds.
template <class T>
std::string values(const std::vector<T>& x, Format format, bool python) {
  return joined(x, [&](T v) { return literal(double(v), format, python); });
}
inline std::string exact_hi(const ExactTensor& t, bool python) {
  return joined(t.exact, [&](long double e) { return literal(double(e), Format::f64, python); });
}
inline std::string exact_lo(const ExactTensor& t, bool python) {
  return joined(t.exact, [&](long double e) {
    return literal(std::isfinite(e) ? double(e - (long double)double(e)) : 0.0, Format::f64, python);
  });
}
inline std::string bounds(const ExactTensor& t, bool python) {
  return joined(t.bound, [&](double b) { return literal(b, Format::f64, python); });
}

// A shape as Python's reshape arguments: "1, 2, 3".
inline std::string dims(std::initializer_list<int64_t> d) {
  std::string text;
  for (int64_t n : d) text += (text.empty() ? "" : ", ") + std::to_string(n);
  return text;
}

// A slot's axes as a comment shows them ("[B,H_kv,Tk,dk]"), and its extent in a call of dims d as
// reshape's arguments ("1, 2, 3, 4").
inline std::string axes(const Slot& s) {
  std::string text = "[";
  for (int a = 0; a < s.shape.rank; ++a) text += (a ? "," : "") + std::string(kDimNames[int(s.shape.dims[a])]);
  return text + "]";
}
inline std::string extent(const Slot& s, const Dims& d) {
  const Extent& e = extent_in(s, d);  // a paged call's pools
  std::string text;
  for (int a = 0; a < e.rank; ++a) text += (a ? ", " : "") + std::to_string(d[e.dims[a]]);
  return text;
}

// A mask's or key lengths' values as integer literals (C++ and Python alike).
template <class I>
std::string integers(const std::vector<I>& x) {
  return joined(x, [](I n) { return std::to_string(int64_t(n)); });
}

// A mask (bool) or key lengths (int32) as a NumPy expression of `shape` (reshape's arguments), None
// when the case has none: a Python file's inputs that are not in the format.
inline std::string python_array(const std::vector<uint8_t>& x, const std::string& shape) {
  return x.empty() ? "None" : "np.array([" + integers(x) + "], bool).reshape(" + shape + ")";
}
inline std::string python_array(const std::vector<int32_t>& x, const std::string& shape) {
  return x.empty() ? "None" : "np.array([" + integers(x) + "], np.int32).reshape(" + shape + ")";
}

// Case c's scalars as attncheck.Problem shows them, as Python keyword arguments: causal by name, the
// window None or (left, right), scale and softcap None for the default.
template <class T>
std::string python_scalars(const Case<T>& c) {
  auto number = [](double x) { return x == 0 ? std::string("None") : "float.fromhex('" + hex(x) + "')"; };
  const bool windowed = c.window_left >= 0 || c.window_right >= 0;
  return "causal=\"" + std::string(causal_name(c.causal)) +
         "\", window=" + (windowed ? "(" + std::to_string(c.window_left) + ", " + std::to_string(c.window_right) + ")" : "None") +
         ", scale=" + number(c.scale) + ", softcap=" + number(c.softcap);
}

// A case's input buffer x of slot s as C++ literals: a floating one in the format the slot stores it
// in (a call in `format`), the others as integers.
template <class E>
std::string c_values(const Slot& s, const std::vector<E>& x, Format format) {
  if constexpr (std::is_floating_point_v<E>)
    return values(x, stored_format(s, format), false);
  else
    return integers(x);
}

// f(slot, buffer, python) for each forward input of case c (call_slots.def), `python` its NumPy
// expression (None when absent): a tensor in the format written by format_array(buffer, shape), a
// float one (f32) from its exact values, a mask as bool, key lengths as int32. The one list of a
// repro's inputs.
template <class T, class FormatArray, class F>
void for_each_input_text(const Case<T>& c, FormatArray format_array, F&& f) {
  const Dims d = dims_of(c.shape);
  for_each_case_input(c, [&](const Slot& s, const auto& x) {
    using E = typename std::decay_t<decltype(x)>::value_type;
    if (x.empty()) return f(s, x, std::string("None"));
    if constexpr (!std::is_floating_point_v<E>) {
      f(s, x, python_array(x, extent(s, d)));
    } else if (s.element != Element::format) {
      const Format stored = stored_format(s, c.format);
      f(s, x,
        "np.array([float.fromhex(x) for x in (" + values(x, stored, true) + ",)], np." +
            (stored == Format::f64 ? "float64" : "float32") + ").reshape(" + extent(s, d) + ")");
    } else if constexpr (std::is_same_v<E, T>) {
      f(s, x, format_array(x, extent(s, d)));
    }
  });
}

// An oracle tensor as Python lines: PREFIXexact_hi, PREFIXexact_lo and PREFIXbound, NumPy arrays of
// `shape` from hex strings (what a pytest file and a standalone script both hold).
inline std::string python_oracle_arrays(const char* prefix, const ExactTensor& e, const std::string& shape) {
  auto array = [&](const char* name, const std::string& items) {
    return std::string(prefix) + name + " = np.array([float.fromhex(x) for x in (" + items + ",)]).reshape(" + shape + ")\n";
  };
  return array("exact_hi", exact_hi(e, true)) + array("exact_lo", exact_lo(e, true)) + array("bound", bounds(e, true));
}

// A file written from one call judges it by the oracle, which computes dropout only for the
// kernel's own keep mask, and a replay keeps none: a dropout call is refused, with what to run instead.
template <class T>
void refuse_dropout(const Case<T>& c) {
  if (c.dropout_p > 0)
    throw std::runtime_error(
        "the failed call uses dropout, which the oracle judges only for the kernel's own keep mask, "
        "and a replay keeps none: replay the property instead (attncheck check --replay FILE)");
}

}  // namespace attncheck
