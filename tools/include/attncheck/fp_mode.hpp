// The floating-point control state that one library can change for a whole process: a library
// linked with -ffast-math or -Ofast turns on flush-to-zero and denormals-are-zero from a
// constructor as it loads (GCC's crtfastmath.o, GCC bug 55522), and a kernel may change the
// rounding mode or unmask exceptions and not restore them. x86-64: MXCSR (its sticky exception
// flags aside) and the x87 control word; AArch64: FPCR; elsewhere the rounding mode alone.
#pragma once

#include <cstdint>
#include <string>

namespace attncheck {

struct FpMode {
  uint64_t control = 0;
  bool operator==(const FpMode&) const = default;
};

FpMode current_fp_mode();
void set_fp_mode(FpMode mode);

// What a change from `before` to `after` did, as a person reads it ("turned on flush-to-zero and
// denormals-are-zero"); empty when nothing changed.
std::string fp_mode_change(FpMode before, FpMode after);

// The finding for a change made by loading a library, or by a call to `entry`, with the likely cause.
std::string fp_mode_finding_at_load(FpMode before, FpMode after);
std::string fp_mode_finding_in_call(const char* entry, FpMode before, FpMode after);

}  // namespace attncheck
