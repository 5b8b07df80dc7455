// Text that came from outside (a file, a child process) made safe to print: a hostile header or
// child cannot put escape sequences on the terminal, split a one-line message or fill the screen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace attncheck {

// Control and non-ASCII bytes become \xNN (newlines and tabs stay when `lines`), and text past
// `longest` bytes is cut with "... (N bytes)".
std::string printable(std::string_view text, size_t longest = 40, bool lines = false);

// A count with its thousands grouped, 1,600: counts are read by people, and 9216 vs 92160 is easy to misread.
std::string grouped(int64_t n);

}  // namespace attncheck
