// Precision<T>: exact decoding of every 2-byte pattern, round to nearest even from double checked at
// every midpoint of the 2-byte formats and against the hardware's double-to-float conversion, and
// independence from the rounding mode and flush-to-zero.
#include "attncheck/precision.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace attncheck {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

uint64_t bits_of(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
float float_of(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// The definition, written independently of the header: sign s, biased exponent e, fraction f of
// F bits; value = (-1)^s 2^(e - bias) (1 + f / 2^F), subnormal (-1)^s 2^(1 - bias) f / 2^F.
double decode_by_definition(uint64_t bits, int E, int F) {
  const int bias = (1 << (E - 1)) - 1;
  const bool negative = (bits >> (E + F)) & 1;
  const int e = int((bits >> F) & ((uint64_t{1} << E) - 1));
  const uint64_t f = bits & ((uint64_t{1} << F) - 1);
  double magnitude;
  if (e == (1 << E) - 1)
    magnitude = f == 0 ? kInf : std::numeric_limits<double>::quiet_NaN();
  else if (e == 0)
    magnitude = std::ldexp(std::ldexp(double(f), -F), 1 - bias);
  else
    magnitude = std::ldexp(1 + std::ldexp(double(f), -F), e - bias);
  return std::copysign(magnitude, negative ? -1.0 : 1.0);
}

// What a NaN of F fraction bits must become from the double NaN d: its sign, all-ones exponent,
// the top F bits of d's fraction, or the quiet bit alone if those are all zero.
uint64_t expected_nan_bits(double d, int E, int F) {
  const uint64_t b = bits_of(d);
  uint64_t payload = (b & ((uint64_t{1} << 52) - 1)) >> (52 - F);
  if (payload == 0) payload = uint64_t{1} << (F - 1);
  return (b >> 63) << (E + F) | ((uint64_t{1} << E) - 1) << F | payload;
}

template <class T>
typename Precision<T>::Bits round_bits(double x) {
  return Precision<T>::to_bits(Precision<T>::from_double(x));
}

// Sets a rounding mode for a scope and restores the previous one.
class RoundingModeScope {
 public:
  explicit RoundingModeScope(int mode) : saved_(std::fegetround()) { ok_ = std::fesetround(mode) == 0; }
  ~RoundingModeScope() { std::fesetround(saved_); }
  bool ok() const { return ok_; }

 private:
  int saved_;
  bool ok_;
};

// ---------------------------------------------------------------------------------------------
// The two 2-byte formats, every bit pattern.

template <class T>
class TwoByteFormat : public ::testing::Test {};
using TwoByteFormats = ::testing::Types<Half, BFloat16>;
struct FormatName {
  template <class T>
  static std::string GetName(int) {
    return Precision<T>::name;
  }
};
TYPED_TEST_SUITE(TwoByteFormat, TwoByteFormats, FormatName);

TYPED_TEST(TwoByteFormat, EveryBitPatternDecodesByTheDefinitionAndRoundTrips) {
  using P = Precision<TypeParam>;
  constexpr int E = P::exponent_bits, F = P::fraction_bits;
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const TypeParam x = P::from_bits(uint16_t(b));
    const double d = P::to_double(x);
    const double reference = decode_by_definition(b, E, F);
    if (std::isnan(reference)) {
      ASSERT_TRUE(std::isnan(d)) << std::hex << b;
      // Sign kept, fraction at the top of double's fraction, the rest zero.
      ASSERT_EQ(bits_of(d), (uint64_t(b) >> (E + F)) << 63 | uint64_t{0x7ff} << 52 | uint64_t(b & ((1u << F) - 1)) << (52 - F))
          << std::hex << b;
    } else {
      ASSERT_EQ(bits_of(d), bits_of(reference)) << std::hex << b;  // bitwise: -0 is not +0
    }
    ASSERT_EQ(P::to_bits(P::from_double(d)), b) << std::hex << b;  // NaNs included
    ASSERT_TRUE(P::from_double(d) == x) << std::hex << b;
  }
}

TYPED_TEST(TwoByteFormat, EveryMidpointRoundsToEvenAndItsNeighboursToTheirSide) {
  using P = Precision<TypeParam>;
  constexpr int E = P::exponent_bits, F = P::fraction_bits;
  const uint32_t sign = 1u << (E + F), inf = ((1u << E) - 1) << F, largest = inf - 1;
  // Adjacent positive finite values a < b (0 and the smallest subnormal first, then up to the
  // largest finite); the negative pairs are their mirror images, ending at (-tiny, -0).
  for (uint32_t a = 0; a < largest; ++a) {
    const uint32_t b = a + 1;
    const double da = P::to_double(P::from_bits(uint16_t(a))), db = P::to_double(P::from_bits(uint16_t(b)));
    ASSERT_LT(da, db) << std::hex << a;
    const double mid = (da + db) / 2;  // exact: both have at most F + 1 significant bits
    ASSERT_EQ(mid - da, db - mid) << std::hex << a;
    const double below = std::nextafter(mid, -kInf), above = std::nextafter(mid, kInf);
    const uint32_t even = a % 2 == 0 ? a : b;
    ASSERT_EQ(round_bits<TypeParam>(mid), even) << std::hex << a;
    ASSERT_EQ(round_bits<TypeParam>(below), a) << std::hex << a;
    ASSERT_EQ(round_bits<TypeParam>(above), b) << std::hex << a;
    ASSERT_EQ(round_bits<TypeParam>(-mid), sign | even) << std::hex << a;
    ASSERT_EQ(round_bits<TypeParam>(-below), sign | a) << std::hex << a;
    ASSERT_EQ(round_bits<TypeParam>(-above), sign | b) << std::hex << a;
    ASSERT_EQ(round_bits<TypeParam>(da), a) << std::hex << a;
    ASSERT_EQ(round_bits<TypeParam>(-da), sign | a) << std::hex << a;
  }
  // Overflow: the midpoint between the largest finite and 2^(emax + 1) ties to the even side,
  // which is inf; just below it stays the largest finite.
  constexpr int emax = (1 << (E - 1)) - 1;
  const double top = std::ldexp(1.0, emax + 1);
  const double overflow_mid = (P::largest_finite + top) / 2;
  EXPECT_EQ(round_bits<TypeParam>(overflow_mid), inf);
  EXPECT_EQ(round_bits<TypeParam>(-overflow_mid), sign | inf);
  EXPECT_EQ(round_bits<TypeParam>(std::nextafter(overflow_mid, 0.0)), largest);
  EXPECT_EQ(round_bits<TypeParam>(-std::nextafter(overflow_mid, 0.0)), sign | largest);
  EXPECT_EQ(round_bits<TypeParam>(P::largest_finite), largest);
  EXPECT_EQ(round_bits<TypeParam>(top), inf);
  EXPECT_EQ(round_bits<TypeParam>(std::numeric_limits<double>::max()), inf);
  EXPECT_EQ(round_bits<TypeParam>(-std::numeric_limits<double>::max()), sign | inf);
  EXPECT_EQ(round_bits<TypeParam>(kInf), inf);
  EXPECT_EQ(round_bits<TypeParam>(-kInf), sign | inf);
  // Zeros and the tiny: double subnormals and the smallest normal double are +-0 here.
  for (double tiny : {0.0, std::numeric_limits<double>::denorm_min(), std::nextafter(0x1p-1022, 0.0), 0x1p-1022, 0x1p-600}) {
    EXPECT_EQ(round_bits<TypeParam>(tiny), 0u) << tiny;
    EXPECT_EQ(round_bits<TypeParam>(-tiny), sign) << tiny;
  }
}

TYPED_TEST(TwoByteFormat, NaNsStayNaNsWithTheirSignAndTopFractionBits) {
  using P = Precision<TypeParam>;
  constexpr int E = P::exponent_bits, F = P::fraction_bits;
  const uint64_t quiet = uint64_t{1} << 51;
  for (uint64_t d :
       {uint64_t{0x7ff0000000000001}, uint64_t{0xfff0000000000001}, uint64_t{0x7ff8000000000000}, uint64_t{0xfff8000000000000},
        uint64_t{0x7ff0000000000000} | quiet >> (F - 1), uint64_t{0x7ff0000000000000} | (quiet >> F),
        uint64_t{0x7fffffffffffffff}, uint64_t{0x7ff4000000000000}, uint64_t{0xfff123456789abcd}}) {
    double x;
    std::memcpy(&x, &d, sizeof x);
    ASSERT_TRUE(std::isnan(x));
    const auto r = round_bits<TypeParam>(x);
    EXPECT_EQ(r, expected_nan_bits(x, E, F)) << std::hex << d;
    EXPECT_TRUE(std::isnan(P::to_double(P::from_bits(r)))) << std::hex << d;
  }
}

// ---------------------------------------------------------------------------------------------
// float: against the hardware conversion.

// The doubles to round to float: random bit patterns (every exponent, NaNs and infinities among
// them), random doubles in float's range and just outside it, and for a sample of floats x (every
// float near the subnormal, smallest-normal and overflow edges) of both signs: x, the midpoint
// between x and the next float up (2^128 above the largest), and that midpoint +- one double ulp.
template <class Fn>
void for_each_probe(int random_count, uint32_t stride, Fn&& fn) {
  std::mt19937_64 rng(20240611);
  for (int i = 0; i < random_count; ++i) fn(std::bit_cast<double>(rng()));
  for (int i = 0; i < random_count; ++i) {
    const uint64_t biased = 1023 - 160 + rng() % 300;  // 2^-160 .. 2^139
    fn(std::bit_cast<double>((rng() & ~(uint64_t{0x7ff} << 52)) | biased << 52));
  }
  auto around = [&](uint32_t bits) {
    const float x = float_of(bits);
    const double dx = x;
    const double next = bits == 0x7f7fffff ? 0x1p128 : double(float_of(bits + 1));
    const double mid = (dx + next) / 2;
    for (double d : {dx, mid, std::nextafter(mid, -kInf), std::nextafter(mid, kInf)}) {
      fn(d);
      fn(-d);
    }
  };
  for (uint32_t b = 0; b < 4096; ++b) around(b);
  for (uint32_t b = 0x00800000 - 4096; b < 0x00800000 + 4096; ++b) around(b);
  for (uint32_t b = 0x7f800000 - 4096; b < 0x7f800000; ++b) around(b);
  std::uniform_int_distribution<uint32_t> jitter(0, stride - 1);
  for (uint64_t b = 0; b + stride < 0x7f800000; b += stride) around(uint32_t(b + jitter(rng)));
}

// What from_double must give: the hardware's conversion under round-to-nearest for numbers; for a
// NaN, the payload rule (the hardware would also set the quiet bit of a signaling NaN).
uint32_t expected_float_bits(double d) {
  if (std::isnan(d)) return uint32_t(expected_nan_bits(d, 8, 23));
  return bits_of(static_cast<float>(d));
}

TEST(FloatPrecision, FromDoubleAgreesWithTheHardwareConversion) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  int64_t count = 0, mismatches = 0;
  for_each_probe(1 << 20, 4096, [&](double d) {
    ++count;
    const uint32_t got = round_bits<float>(d), want = expected_float_bits(d);
    if (got != want && ++mismatches <= 10)
      ADD_FAILURE() << std::hexfloat << d << " (0x" << std::hex << bits_of(d) << "): got 0x" << got << ", want 0x" << want;
  });
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(count, 4'000'000);
}

TEST(FloatPrecision, ToDoubleIsExactAndRoundTrips) {
  std::mt19937_64 rng(7);
  auto check = [&](uint32_t b) {
    const float x = float_of(b);
    const double d = Precision<float>::to_double(x);
    const double reference = decode_by_definition(b, 8, 23);
    if (std::isnan(reference))
      ASSERT_EQ(bits_of(d), uint64_t(b >> 31) << 63 | uint64_t{0x7ff} << 52 | uint64_t(b & 0x7fffff) << 29) << std::hex << b;
    else
      ASSERT_EQ(bits_of(d), bits_of(reference)) << std::hex << b;
    ASSERT_EQ(Precision<float>::to_bits(Precision<float>::from_double(d)), b) << std::hex << b;
  };
  for (uint32_t b = 0; b < 1 << 16; ++b) {  // the bottom and the top of both signs, all NaN-adjacent
    check(b);
    check(0x7f800000 - (1 << 15) + b);
    check(0x80000000 | b);
    check(0xff800000 - (1 << 15) + b);
  }
  for (int i = 0; i < 1 << 18; ++i) check(uint32_t(rng()));
  EXPECT_EQ(Precision<float>::to_bits(1.5f), 0x3fc00000u);
  EXPECT_EQ(Precision<float>::from_bits(0xbf800000u), -1.0f);
}

// ---------------------------------------------------------------------------------------------
// Independence from the floating-point environment.

struct Results {
  std::vector<uint32_t> f32;
  std::vector<uint16_t> f16, bf16;
  std::vector<uint64_t> decoded;  // to_double of every Half, BFloat16 and of floats near the edges
  std::vector<uint32_t> cast;     // static_cast<float>, for contrast
};

// The probes are made once, in the default environment: the test's own arithmetic (a float read as
// a double, a midpoint) would itself be flushed or rounded differently under the modes below.
const std::vector<double>& environment_probes() {
  static const std::vector<double> probes = [] {
    std::vector<double> v;
    for_each_probe(1 << 16, 1 << 16, [&](double d) { v.push_back(d); });
    return v;
  }();
  return probes;
}

Results compute_everything(const std::vector<double>& probes) {
  Results r;
  for (double d : probes) {
    r.f32.push_back(round_bits<float>(d));
    r.f16.push_back(round_bits<Half>(d));
    r.bf16.push_back(round_bits<BFloat16>(d));
    const volatile double vd = d;  // a real conversion, at run time, in the current mode
    const volatile float vf = static_cast<float>(vd);
    r.cast.push_back(bits_of(float(vf)));
  }
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    r.decoded.push_back(bits_of(Precision<Half>::to_double(Half{uint16_t(b)})));
    r.decoded.push_back(bits_of(Precision<BFloat16>::to_double(BFloat16{uint16_t(b)})));
    r.decoded.push_back(bits_of(Precision<float>::to_double(float_of(b))));  // subnormals
    r.decoded.push_back(bits_of(Precision<float>::to_double(float_of(0x80000000 | b))));
  }
  return r;
}

int64_t differences(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

TEST(FloatingPointEnvironment, ConversionsDoNotDependOnTheRoundingMode) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  const std::vector<double>& probes = environment_probes();
  const Results nearest = compute_everything(probes);
  for (int mode : {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO}) {
    Results r;
    {
      RoundingModeScope scope(mode);
      ASSERT_TRUE(scope.ok());
      ASSERT_EQ(std::fegetround(), mode);
      r = compute_everything(probes);
    }
    ASSERT_EQ(std::fegetround(), FE_TONEAREST);
    EXPECT_TRUE(r.f32 == nearest.f32) << mode;
    EXPECT_TRUE(r.f16 == nearest.f16) << mode;
    EXPECT_TRUE(r.bf16 == nearest.bf16) << mode;
    EXPECT_TRUE(r.decoded == nearest.decoded) << mode;
    // The contrast, and the proof that the mode was in force: the hardware's cast does change.
    const int64_t cast_changes = differences(r.cast, nearest.cast);
    EXPECT_GT(cast_changes, 0) << mode;
    RecordProperty(mode == FE_UPWARD     ? "cast_changes_upward"
                   : mode == FE_DOWNWARD ? "cast_changes_downward"
                                         : "cast_changes_towardzero",
                   std::to_string(cast_changes) + " of " + std::to_string(r.cast.size()));
  }
}

#if defined(__SSE__)
// x86's flush-to-zero (results) and denormals-are-zero (inputs), the -Ofast / -ffast-math mode.
TEST(FloatingPointEnvironment, ConversionsDoNotDependOnFlushToZero) {
  const std::vector<double>& probes = environment_probes();
  const Results normal = compute_everything(probes);
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040);  // FTZ | DAZ
  const Results flushed = compute_everything(probes);
  _mm_setcsr(saved);
  EXPECT_TRUE(flushed.f32 == normal.f32);
  EXPECT_TRUE(flushed.f16 == normal.f16);
  EXPECT_TRUE(flushed.bf16 == normal.bf16);
  EXPECT_TRUE(flushed.decoded == normal.decoded);
  EXPECT_GT(differences(flushed.cast, normal.cast), 0);  // the mode was in force
}
#endif

// ---------------------------------------------------------------------------------------------
// The constants, from the bit patterns that define them.

template <class T>
void expect_layout(int exponent_bits, int fraction_bits, const char* name, const char* label) {
  EXPECT_EQ(Precision<T>::exponent_bits, exponent_bits);
  EXPECT_EQ(Precision<T>::fraction_bits, fraction_bits);
  EXPECT_STREQ(Precision<T>::name, name);
  EXPECT_STREQ(Precision<T>::label, label);
}

static_assert(std::is_same_v<Precision<Half>::Bits, uint16_t>);
static_assert(std::is_same_v<Precision<BFloat16>::Bits, uint16_t>);
static_assert(std::is_same_v<Precision<float>::Bits, uint32_t>);
static_assert(std::is_same_v<Precision<double>::Bits, uint64_t>);

TEST(PrecisionConstants, Half) {
  using P = Precision<Half>;
  expect_layout<Half>(5, 10, "float16", "float16, u = 2^-11");
  auto value = [](uint64_t b) { return decode_by_definition(b, 5, 10); };
  EXPECT_EQ(P::largest_finite, value(0x7bff));
  EXPECT_EQ(P::largest_finite, 65504);
  EXPECT_EQ(P::smallest_normal, value(0x0400));
  EXPECT_EQ(P::smallest_normal, 0x1p-14);
  EXPECT_EQ(value(0x3c00), 1);
  EXPECT_EQ(P::u, (value(0x3c01) - 1) / 2);
  EXPECT_EQ(P::u, 0x1p-11);
  EXPECT_EQ(P::to_double(Half{0x0001}), 0x1p-24);
  EXPECT_TRUE(Half{0x3c00} == P::from_double(1));
  EXPECT_FALSE(Half{0x0000} == Half{0x8000});  // bitwise, not numeric
}

TEST(PrecisionConstants, BFloat16) {
  using P = Precision<BFloat16>;
  expect_layout<BFloat16>(8, 7, "bfloat16", "bfloat16, u = 2^-8");
  auto value = [](uint64_t b) { return decode_by_definition(b, 8, 7); };
  EXPECT_EQ(P::largest_finite, value(0x7f7f));
  EXPECT_EQ(P::largest_finite, 0x1.fep127);
  EXPECT_EQ(P::smallest_normal, value(0x0080));
  EXPECT_EQ(P::smallest_normal, 0x1p-126);
  EXPECT_EQ(value(0x3f80), 1);
  EXPECT_EQ(P::u, (value(0x3f81) - 1) / 2);
  EXPECT_EQ(P::u, 0x1p-8);
  // bfloat16 is the top half of a float32.
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const double d = P::to_double(BFloat16{uint16_t(b)});
    if (!std::isnan(d)) {
      ASSERT_EQ(bits_of(d), bits_of(double(float_of(b << 16)))) << std::hex << b;
    }
  }
}

TEST(PrecisionConstants, Float) {
  using P = Precision<float>;
  expect_layout<float>(8, 23, "float32", "float32, u = 2^-24");
  auto value = [](uint64_t b) { return decode_by_definition(b, 8, 23); };
  EXPECT_EQ(P::largest_finite, value(0x7f7fffff));
  EXPECT_EQ(P::largest_finite, std::numeric_limits<float>::max());
  EXPECT_EQ(P::smallest_normal, value(0x00800000));
  EXPECT_EQ(P::smallest_normal, std::numeric_limits<float>::min());
  EXPECT_EQ(P::u, (value(0x3f800001) - 1) / 2);
  EXPECT_EQ(P::u, std::numeric_limits<float>::epsilon() / 2);
  EXPECT_EQ(P::fraction_bits + 1, std::numeric_limits<float>::digits);
}

TEST(PrecisionConstants, Double) {
  using P = Precision<double>;
  expect_layout<double>(11, 52, "float64", "float64, u = 2^-53");
  EXPECT_EQ(P::largest_finite, std::numeric_limits<double>::max());
  EXPECT_EQ(P::smallest_normal, std::numeric_limits<double>::min());
  EXPECT_EQ(P::u, std::numeric_limits<double>::epsilon() / 2);
  EXPECT_EQ(P::fraction_bits + 1, std::numeric_limits<double>::digits);
  EXPECT_EQ(P::largest_finite, decode_by_definition(0x7fefffffffffffff, 11, 52));
  EXPECT_EQ(P::smallest_normal, decode_by_definition(0x0010000000000000, 11, 52));
}

TEST(DoublePrecision, ConversionsAreTheIdentityOnTheBits) {
  using P = Precision<double>;
  for (uint64_t b :
       {uint64_t{0}, uint64_t{0x8000000000000000}, uint64_t{1}, uint64_t{0x800fffffffffffff}, uint64_t{0x3ff0000000000001},
        uint64_t{0x7ff0000000000000}, uint64_t{0x7ff0000000000001}, uint64_t{0xfff8000000000123}, uint64_t{0x7fefffffffffffff}}) {
    const double x = P::from_bits(b);
    EXPECT_EQ(P::to_bits(x), b);
    EXPECT_EQ(P::to_bits(P::from_double(x)), b) << std::hex << b;  // subnormals and NaN payloads kept
    EXPECT_EQ(P::to_bits(P::to_double(x)), b) << std::hex << b;
  }
}

}  // namespace
}  // namespace attncheck
