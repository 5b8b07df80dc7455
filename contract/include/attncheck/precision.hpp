// Floating-point formats as traits. Precision<T> is everything attncheck knows about the format T:
// its bit layout, unit roundoff, range, the words every report names it by, and exact conversions
// to and from double. One specialization per format, in the style of LLVM libc's FPBits: code that
// works on several precisions asks Precision<T> and never tests sizeof(T). A new format costs one
// specialization here, its Format value (in kFormats and visit_format below), its row in the
// feature table (features.hpp), and how other languages spell its bits (source_text.hpp for
// Python, standalone_repro.cpp for NumPy).
//
// The 2-byte formats are stored as bit patterns (Half, BFloat16), and this public header depends on
// no compiler support for 16-bit floats (no _Float16, __bf16 or other extension): it builds wherever
// C++20 does, and a kernel's half-precision buffers are read by their bits. Arithmetic happens in
// double: to_double is exact for every format, and from_double rounds to nearest, ties to even, on
// the bits with integer arithmetic only, so neither depends on the floating-point rounding mode or
// on flush-to-zero / denormals-are-zero, which a kernel under test may have left changed.
//
// NaNs keep their sign and payload both ways (the payload is the top of the fraction): a signaling
// NaN stays signaling, unlike a hardware conversion, which would quiet it; a payload whose kept
// bits are all zero gets the quiet bit, so a NaN always stays a NaN.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace attncheck {

// A format by name at run time: what a plugin's dtype says, what a case is stored in. The values
// are plugin ABI v2's ATTNCHECK_F32 .. ATTNCHECK_BF16; visit_format (below) turns one into its type.
enum class Format : int32_t { f32 = 0, f64 = 1, f16 = 2, bf16 = 3 };

// Every format, in that order: what a loop over the formats walks.
inline constexpr Format kFormats[] = {Format::f32, Format::f64, Format::f16, Format::bf16};

// IEEE 754 binary16: 1 sign, 5 exponent, 10 fraction bits.
struct Half {
  uint16_t bits;
  bool operator==(const Half&) const = default;  // bitwise: +0 != -0, a NaN equals its own bits
};

// bfloat16: 1 sign, 8 exponent, 7 fraction bits (the top half of a float32).
struct BFloat16 {
  uint16_t bits;
  bool operator==(const BFloat16&) const = default;  // bitwise
};

// One specialization per supported format; left undefined, so any other type does not compile.
template <class T>
struct Precision;

namespace detail {

inline uint64_t bits_of_double(double x) { return std::bit_cast<uint64_t>(x); }
inline double double_of_bits(uint64_t b) { return std::bit_cast<double>(b); }

// The bit logic of every IEEE-style binary format narrower than double: 1 sign bit, E exponent bits
// with bias 2^(E-1) - 1, F fraction bits under an implicit leading 1 for normals, exponent field 0
// for zeros and subnormals, all ones for inf (fraction 0) and NaN (fraction nonzero; its top bit is
// the quiet bit). E <= 10 makes every value of the format a normal double or zero, and every double
// subnormal far below half the format's smallest subnormal.
template <int E, int F>
struct BinaryFormat {
  static_assert(E >= 2 && E <= 10 && F >= 1 && F < 52, "a format narrower than double in range and precision");
  using Bits = std::conditional_t<(1 + E + F <= 16), uint16_t, std::conditional_t<(1 + E + F <= 32), uint32_t, uint64_t>>;

  static constexpr int bias = (1 << (E - 1)) - 1;
  static constexpr int emin = 1 - bias, emax = bias;  // exponents of the smallest and largest normal binades
  static constexpr uint64_t sign_mask = uint64_t{1} << (E + F);
  static constexpr uint64_t exponent_mask = ((uint64_t{1} << E) - 1) << F;  // also the encoding of +inf
  static constexpr uint64_t fraction_mask = (uint64_t{1} << F) - 1;
  static constexpr uint64_t quiet_bit = uint64_t{1} << (F - 1);

  // double: 1 sign, 11 exponent (bias 1023), 52 fraction bits.
  static constexpr int d_fraction_bits = 52, d_bias = 1023;
  static constexpr uint64_t d_exponent_mask = uint64_t{0x7ff} << d_fraction_bits;
  static constexpr uint64_t d_fraction_mask = (uint64_t{1} << d_fraction_bits) - 1;

  // Exact: the sign, the value, and for a NaN its fraction bits at the top of double's fraction.
  static double to_double(Bits b) {
    const uint64_t x = b;
    const uint64_t sign = (x & sign_mask) << (63 - E - F);
    const uint64_t biased = (x & exponent_mask) >> F;
    const uint64_t fraction = x & fraction_mask;
    if (x & exponent_mask) {
      if ((x & exponent_mask) == exponent_mask)  // inf or NaN, payload kept
        return double_of_bits(sign | d_exponent_mask | fraction << (d_fraction_bits - F));
      return double_of_bits(sign | (biased + d_bias - bias) << d_fraction_bits | fraction << (d_fraction_bits - F));
    }
    if (fraction == 0) return double_of_bits(sign);  // +-0
    // A subnormal, fraction * 2^(emin - F), is 2^(emin - F + k) (1 + (fraction - 2^k) / 2^k) with k the
    // position of fraction's top bit: a normal double.
    const int k = static_cast<int>(std::bit_width(fraction)) - 1;
    const uint64_t d_biased = uint64_t(emin - F + k + d_bias);
    return double_of_bits(sign | d_biased << d_fraction_bits | (fraction - (uint64_t{1} << k)) << (d_fraction_bits - k));
  }

  // Round to nearest, ties to even, with IEEE overflow to +-inf and gradual underflow.
  static Bits from_double(double x) {
    const uint64_t d = bits_of_double(x);
    const uint64_t sign = (d >> 63) << (E + F);
    const uint64_t d_biased = (d & d_exponent_mask) >> d_fraction_bits;
    const uint64_t d_fraction = d & d_fraction_mask;
    if (d_biased == 0x7ff) {
      if (d_fraction == 0) return Bits(sign | exponent_mask);        // +-inf
      const uint64_t payload = d_fraction >> (d_fraction_bits - F);  // NaN: its top fraction bits
      return Bits(sign | exponent_mask | (payload != 0 ? payload : quiet_bit));
    }
    // +-0 and double subnormals: below 2^-1022, far below half this format's smallest subnormal.
    if (d_biased == 0) return Bits(sign);
    const int e = int(d_biased) - d_bias;             // |x| = m 2^(e - 52), 2^52 <= m < 2^53
    if (e > emax) return Bits(sign | exponent_mask);  // |x| >= 2^(emax + 1): overflow
    const uint64_t m = (uint64_t{1} << d_fraction_bits) | d_fraction;
    // The format's quantum at |x| is 2^(e - F) in a normal binade and 2^(emin - F) below 2^emin;
    // shift is how many low bits of m lie below it (at least 1, since F < 52).
    const int shift = d_fraction_bits - F + (e < emin ? emin - e : 0);
    if (shift > d_fraction_bits + 1) return Bits(sign);  // m < 2^53 <= half a quantum: +-0
    uint64_t r = m >> shift;                             // |x| in quanta, truncated
    const uint64_t rest = m & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
    if (rest > half || (rest == half && (r & 1))) ++r;
    // Below 2^emin, r is the subnormal's fraction; r = 2^F is the smallest normal's encoding. In a
    // normal binade r carries the implicit bit 2^F, so adding it to the exponent field one below e's
    // lets a rounding carry (r = 2^(F+1)) step into the next binade; from the top binade that gives
    // exponent_mask with fraction 0, which is inf.
    const uint64_t magnitude = e < emin ? r : (uint64_t(e + bias - 1) << F) + r;
    return Bits(sign | magnitude);
  }
};

}  // namespace detail

namespace detail {

// What a 2-byte format stored as its bit pattern (Half, BFloat16) has in common: the bits are the
// value, and conversions go through its BinaryFormat. A specialization adds its constants and names.
template <class Storage, int E, int F>
struct TwoByte {
  using Bits = uint16_t;
  static constexpr int exponent_bits = E, fraction_bits = F;
  using Layout = BinaryFormat<E, F>;
  static Bits to_bits(Storage x) { return x.bits; }
  static Storage from_bits(Bits b) { return Storage{b}; }
  static double to_double(Storage x) { return Layout::to_double(x.bits); }
  static Storage from_double(double x) { return Storage{Layout::from_double(x)}; }
};

}  // namespace detail

template <>
struct Precision<Half> : detail::TwoByte<Half, 5, 10> {
  static constexpr double u = 0x1p-11;
  static constexpr double smallest_normal = 0x1p-14;
  static constexpr double largest_finite = 65504;
  static constexpr const char* name = "float16";
  static constexpr const char* label = "float16, u = 2^-11";
  static constexpr Format format = Format::f16;
  static constexpr const char* short_name = "f16";
  static constexpr const char* capability_name = "ATTNCHECK_CAP_F16";  // its capability bit in plugin.h
  static constexpr const char* numpy = "<f2";                          // its storage as NumPy reads the protocol's bytes
};

template <>
struct Precision<BFloat16> : detail::TwoByte<BFloat16, 8, 7> {
  static constexpr double u = 0x1p-8;
  static constexpr double smallest_normal = 0x1p-126;
  static constexpr double largest_finite = 0x1.fep127;  // (2 - 2^-7) 2^127
  static constexpr const char* name = "bfloat16";
  static constexpr const char* label = "bfloat16, u = 2^-8";
  static constexpr Format format = Format::bf16;
  static constexpr const char* short_name = "bf16";
  static constexpr const char* capability_name = "ATTNCHECK_CAP_BF16";  // its capability bit in plugin.h
  static constexpr const char* numpy = "<u2";                           // its storage as NumPy reads the protocol's bytes
};

template <>
struct Precision<float> {
  static_assert(std::numeric_limits<float>::is_iec559 && std::numeric_limits<float>::digits == 24, "float is binary32");
  using Bits = uint32_t;
  static constexpr int exponent_bits = 8, fraction_bits = 23;
  static constexpr double u = 0x1p-24;
  static constexpr double smallest_normal = 0x1p-126;
  static constexpr double largest_finite = 0x1.fffffep127;  // FLT_MAX
  static constexpr const char* name = "float32";
  static constexpr const char* label = "float32, u = 2^-24";
  static constexpr Format format = Format::f32;
  static constexpr const char* short_name = "f32";
  static constexpr const char* capability_name = "ATTNCHECK_CAP_F32";  // its capability bit in plugin.h
  static constexpr const char* numpy = "<f4";                          // its storage as NumPy reads the protocol's bytes
  using Layout = detail::BinaryFormat<exponent_bits, fraction_bits>;
  static Bits to_bits(float x) { return std::bit_cast<Bits>(x); }
  static float from_bits(Bits b) { return std::bit_cast<float>(b); }
  // On the bits, not by casts: a cast would read a subnormal as 0 under denormals-are-zero, quiet a
  // signaling NaN, and (double to float) round by the current mode.
  static double to_double(float x) { return Layout::to_double(to_bits(x)); }
  static float from_double(double x) { return from_bits(Layout::from_double(x)); }
};

template <>
struct Precision<double> {
  static_assert(std::numeric_limits<double>::is_iec559 && std::numeric_limits<double>::digits == 53, "double is binary64");
  using Bits = uint64_t;
  static constexpr int exponent_bits = 11, fraction_bits = 52;
  static constexpr double u = 0x1p-53;
  static constexpr double smallest_normal = 0x1p-1022;
  static constexpr double largest_finite = 0x1.fffffffffffffp1023;  // DBL_MAX
  static constexpr const char* name = "float64";
  static constexpr const char* label = "float64, u = 2^-53";
  static constexpr Format format = Format::f64;
  static constexpr const char* short_name = "f64";
  static constexpr const char* capability_name = "ATTNCHECK_CAP_F64";  // its capability bit in plugin.h
  static constexpr const char* numpy = "<f8";                          // its storage as NumPy reads the protocol's bytes
  static Bits to_bits(double x) { return detail::bits_of_double(x); }
  static double from_bits(Bits b) { return detail::double_of_bits(b); }
  static double to_double(double x) { return x; }    // the identity: no arithmetic, nothing to flush
  static double from_double(double x) { return x; }  // subnormals and NaN payloads included
};

namespace detail {

constexpr double pow2(int k) {
  double p = 1;
  for (; k > 0; --k) p *= 2;
  for (; k < 0; ++k) p /= 2;
  return p;
}

// Each specialization's constants, derived from its exponent and fraction widths.
template <class T>
constexpr bool constants_follow_from_layout() {
  using P = Precision<T>;
  constexpr int bias = (1 << (P::exponent_bits - 1)) - 1;
  return 1 + P::exponent_bits + P::fraction_bits == std::numeric_limits<typename P::Bits>::digits &&
         P::u == pow2(-(P::fraction_bits + 1)) && P::smallest_normal == pow2(1 - bias) &&
         P::largest_finite == (2 - pow2(-P::fraction_bits)) * pow2(bias);
}
static_assert(constants_follow_from_layout<Half>());
static_assert(constants_follow_from_layout<BFloat16>());
static_assert(constants_follow_from_layout<float>());
static_assert(constants_follow_from_layout<double>());
static_assert(std::is_same_v<Precision<Half>::Layout::Bits, Precision<Half>::Bits> &&
              std::is_same_v<Precision<BFloat16>::Layout::Bits, Precision<BFloat16>::Bits> &&
              std::is_same_v<Precision<float>::Layout::Bits, Precision<float>::Bits>);

}  // namespace detail

// visit(T{}) for the type T whose Precision<T>::format is `format`: the one place a format's name
// becomes its type.
template <class Visitor>
decltype(auto) visit_format(Format format, Visitor visit) {
  switch (format) {
    case Format::f64:
      return visit(double{});
    case Format::f16:
      return visit(Half{});
    case Format::bf16:
      return visit(BFloat16{});
    case Format::f32:
      break;
  }
  return visit(float{});
}

// The name reports give a format: "float32", "bfloat16".
inline const char* format_name(Format format) {
  return visit_format(format, [](auto zero) { return Precision<decltype(zero)>::name; });
}

// Whether `format` is a 2-byte one (f16, bf16): stored in it, computed in float or better.
inline bool is_narrow(Format format) { return format == Format::f16 || format == Format::bf16; }

// visit(F{}) for the 2-byte format F that `format` (is_narrow) names.
template <class Visitor>
decltype(auto) visit_narrow(Format format, Visitor visit) {
  if (format == Format::bf16) return visit(BFloat16{});
  return visit(Half{});
}

// x rounded to the nearest value of format F (ties to even), as a double.
template <class F>
double round_to(double x) {
  return Precision<F>::to_double(Precision<F>::from_double(x));
}

// The same for a format named at run time.
inline double round_to(Format format, double x) {
  return visit_format(format, [x](auto zero) { return round_to<decltype(zero)>(x); });
}

// Whether every value of x [n] is one of format F (a NaN counts, whatever its payload).
template <class F, class T>
bool all_in_format(const T* x, int64_t n) {
  for (int64_t at = 0; at < n; ++at)
    if (const double e = double(x[at]); e == e && round_to<F>(e) != e) return false;
  return true;
}

}  // namespace attncheck
