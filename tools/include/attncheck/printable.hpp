// Text that came from outside (a file, a child process) made safe to print: a hostile header or
// child cannot put escape sequences on the terminal, split a one-line message or fill the screen;
// and made a string of the Python attncheck repro writes, whatever its bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace attncheck {

// Printable ASCII and UTF-8 characters stay as they are; a backslash becomes \\ and every other
// byte \xNN (controls, C1 controls, line separators and bidirectional controls, bytes that are not
// UTF-8), so that each escape reads one way; newlines and tabs stay when `lines`. Text past
// `longest` bytes is cut, never inside a character, with "... (N bytes)".
std::string printable(std::string_view text, size_t longest = 40, bool lines = false);

// printable() of text that printable() already made, or should have: its escapes (\\, \xNN) stay
// as they are, so that a report's text passed on (a replay file's why, a FAIL text cut shorter) is
// escaped once, not once more each time; anything else is escaped as printable() escapes it.
std::string reprintable(std::string_view text, size_t longest = 40);

// A Python string literal holding `text` exactly: a quote, backslash or control escaped, a byte that
// is not UTF-8 as the surrogate Python decodes it to (\udcNN, as sys.argv and os.fsdecode hold it,
// which a subprocess encodes back to the byte). The file stays valid UTF-8 whatever `text` holds.
std::string python_literal(std::string_view text);

// A count with its thousands grouped, 1,600: counts are read by people, and 9216 vs 92160 is easy to misread.
std::string grouped(int64_t n);

}  // namespace attncheck
