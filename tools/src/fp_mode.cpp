#include "attncheck/fp_mode.hpp"

#include <cfenv>
#include <vector>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace attncheck {
namespace {

#if defined(__x86_64__)
// MXCSR in the low half (bits 0-5, the sticky flags, left out), the x87 control word above it.
constexpr uint64_t kFlags = 0x3f, kDaz = 1u << 6, kFtz = 1u << 15;
constexpr int kRoundingShift = 13;       // MXCSR bits 13-14: nearest, down, up, toward zero
constexpr uint64_t kMasks = 0x3fu << 7;  // invalid, denormal, divide-by-zero, overflow, underflow, precision
const char* const kExceptions[] = {"invalid", "denormal", "divide-by-zero", "overflow", "underflow", "inexact"};

uint16_t x87_control() {
  uint16_t word;
  asm volatile("fnstcw %0" : "=m"(word));
  return word;
}
#endif

const char* rounding_name(int mode) {
  const char* const names[] = {"to nearest", "downward", "upward", "toward zero"};
  return mode >= 0 && mode < 4 ? names[mode] : "unknown";
}

std::string join(const std::vector<std::string>& parts) {
  std::string text;
  for (size_t n = 0; n < parts.size(); ++n) text += (n == 0 ? "" : n + 1 == parts.size() ? " and " : ", ") + parts[n];
  return text;
}

bool turned_on_flushing(FpMode before, FpMode after) {
#if defined(__x86_64__)
  return (after.control & ~before.control & (kFtz | kDaz)) != 0;
#elif defined(__aarch64__)
  return (after.control & ~before.control & (1u << 24)) != 0;  // FPCR.FZ
#else
  (void)before, (void)after;
  return false;
#endif
}

}  // namespace

FpMode current_fp_mode() {
#if defined(__x86_64__)
  return {(uint64_t(_mm_getcsr()) & ~kFlags) | uint64_t(x87_control()) << 32};
#elif defined(__aarch64__)
  return {uint64_t(__builtin_aarch64_get_fpcr())};
#else
  return {uint64_t(unsigned(std::fegetround()))};
#endif
}

void set_fp_mode(FpMode mode) {
#if defined(__x86_64__)
  _mm_setcsr(unsigned((_mm_getcsr() & kFlags) | (mode.control & 0xffffffffu & ~kFlags)));
  const uint16_t word = uint16_t(mode.control >> 32);
  asm volatile("fldcw %0" : : "m"(word));
#elif defined(__aarch64__)
  __builtin_aarch64_set_fpcr(unsigned(mode.control));
#else
  std::fesetround(int(mode.control));
#endif
}

std::string fp_mode_change(FpMode before, FpMode after) {
  if (before == after) return "";
  std::vector<std::string> what;
#if defined(__x86_64__)
  const uint64_t b = before.control, a = after.control;
  auto bit = [&](uint64_t mask, const char* name) {
    if ((a & mask) != (b & mask)) what.push_back(std::string((a & mask) ? "turned on " : "turned off ") + name);
  };
  if ((a & (kFtz | kDaz)) == (kFtz | kDaz) && (b & (kFtz | kDaz)) == 0) {
    what.push_back("turned on flush-to-zero and denormals-are-zero");
  } else {
    bit(kFtz, "flush-to-zero");
    bit(kDaz, "denormals-are-zero");
  }
  const int rounding_b = int(b >> kRoundingShift) & 3, rounding_a = int(a >> kRoundingShift) & 3;
  if (rounding_a != rounding_b)
    what.push_back(std::string("set the rounding mode ") + rounding_name(rounding_a) + " (it was " + rounding_name(rounding_b) +
                   ")");
  std::vector<std::string> unmasked;
  for (int e = 0; e < 6; ++e)
    if ((b & (1u << (7 + e))) && !(a & (1u << (7 + e)))) unmasked.push_back(kExceptions[e]);
  if (!unmasked.empty()) what.push_back("unmasked the " + join(unmasked) + " exceptions (they now raise SIGFPE)");
  if ((a & kMasks) & ~(b & kMasks)) what.push_back("masked floating-point exceptions");
  // fesetround sets the x87 rounding with MXCSR's: report the x87 word only for something more.
  const uint64_t x87_b = b >> 32, x87_a = a >> 32, x87_rounding = 3u << 10;
  const bool same_rounding = int(x87_a >> 10 & 3) == rounding_a && int(x87_b >> 10 & 3) == rounding_b;
  if (((x87_a ^ x87_b) & (same_rounding ? ~x87_rounding : ~uint64_t(0))) != 0)
    what.push_back("changed the x87 control word (precision or rounding of long double)");
  if (what.empty()) what.push_back("changed the MXCSR control bits");
#else
  (void)before, (void)after;
  what.push_back(turned_on_flushing(before, after) ? "turned on flush-to-zero" : "changed the floating-point control state");
#endif
  return join(what);
}

std::string fp_mode_finding_at_load(FpMode before, FpMode after) {
  const std::string change = fp_mode_change(before, after);
  if (change.empty()) return "";
  return "loading the library " + change + " for the whole process" +
         (turned_on_flushing(before, after)
              ? "; it was linked with -ffast-math or -Ofast (GCC's crtfastmath.o), so every program that loads it "
                "computes differently"
              : "");
}

std::string fp_mode_finding_in_call(const char* entry, FpMode before, FpMode after) {
  const std::string change = fp_mode_change(before, after);
  return change.empty() ? "" : std::string("a call to ") + entry + " " + change + " and left it so for the whole process";
}

}  // namespace attncheck
