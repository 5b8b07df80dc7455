#include "attncheck/printable.hpp"

#include <cstdio>

namespace attncheck {
namespace {

// The UTF-8 character at the start of `text`: its code point and length in bytes, or length 0 when
// the bytes are not one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF,
// cut short).
struct Character {
  char32_t code = 0;
  size_t length = 0;
};

Character decoded(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {lead, 1};
  // The length a lead byte starts, and the range of the byte after it, the one that rules out
  // overlong forms (E0, F0), surrogates (ED) and code points past U+10FFFF (F4).
  size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf)
    length = 2;
  else if (lead >= 0xe0 && lead <= 0xef)
    length = 3, low = lead == 0xe0 ? 0xa0 : 0x80, high = lead == 0xed ? 0x9f : 0xbf;
  else if (lead >= 0xf0 && lead <= 0xf4)
    length = 4, low = lead == 0xf0 ? 0x90 : 0x80, high = lead == 0xf4 ? 0x8f : 0xbf;
  if (length == 0 || text.size() < length || byte(1) < low || byte(1) > high) return {};
  char32_t code = lead & (0x7f >> length);
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return {};
    code = code << 6 | (byte(i) & 0x3f);
  }
  return {code, length};
}

// A character past ASCII that shows as itself: not a C1 control (U+0080 to U+009F, which terminals
// obey as ESC sequences), not one that splits a line (U+2028, U+2029), not a bidirectional control
// (it would reorder the text around it on screen).
bool shown(char32_t code) {
  return code >= 0xa0 && code != 0x2028 && code != 0x2029 && code != 0x061c && code != 0x200e && code != 0x200f &&
         !(code >= 0x202a && code <= 0x202e) && !(code >= 0x2066 && code <= 0x2069);
}

// The length of the escape printable() writes (\\ or \xNN) at the start of `text`, or 0.
size_t own_escape(std::string_view text) {
  const auto hex_digit = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  if (text.starts_with("\\\\")) return 2;
  return text.size() >= 4 && text.starts_with("\\x") && hex_digit(text[2]) && hex_digit(text[3]) ? 4 : 0;
}

// printable(), and with `kept` reprintable(), whose text holds printable()'s escapes already.
std::string shown_text(std::string_view text, size_t longest, bool lines, bool kept) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < longest;) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t as_is = 0;  // bytes from i shown as they are: a character, or an escape kept
    if (c == '\\')
      as_is = kept ? own_escape(text.substr(i)) : 0;
    else if ((c >= 0x20 && c < 0x7f) || (lines && (c == '\n' || c == '\t')))
      as_is = 1;
    else if (const Character ch = decoded(text.substr(i)); ch.length > 1 && shown(ch.code))
      as_is = ch.length;
    if (as_is > 0) {
      if (i + as_is > longest) break;  // cut before it, not inside it
      out += text.substr(i, as_is);
      i += as_is;
      continue;
    }
    char hex[5];
    std::snprintf(hex, sizeof hex, "\\x%02x", c);
    out += c == '\\' ? "\\\\" : hex;
    ++i;
  }
  if (text.size() > longest) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace

std::string printable(std::string_view text, size_t longest, bool lines) { return shown_text(text, longest, lines, false); }

std::string reprintable(std::string_view text, size_t longest) { return shown_text(text, longest, false, true); }

std::string python_literal(std::string_view text) {
  std::string quoted = "\"";
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const Character ch = decoded(text.substr(i));
    char escaped[12];
    if (c == '"' || c == '\\')
      quoted += std::string("\\") + char(c);
    else if (c >= 0x20 && c < 0x7f)
      quoted += char(c);
    else if (ch.length == 0)  // a byte that is not UTF-8: the surrogate Python decodes it to, as sys.argv holds it
      quoted += (std::snprintf(escaped, sizeof escaped, "\\udc%02x", c), escaped);
    else if (ch.length > 1 && shown(ch.code))
      quoted += text.substr(i, ch.length);
    else
      quoted += (std::snprintf(escaped, sizeof escaped,
                               ch.code < 0x100     ? "\\x%02x"
                               : ch.code < 0x10000 ? "\\u%04x"
                                                   : "\\U%08x",
                               unsigned(ch.code)),
                 escaped);
    i += ch.length ? ch.length : 1;
  }
  return quoted + "\"";
}

std::string grouped(int64_t n) {
  const std::string digits = std::to_string(n < 0 ? -n : n);
  std::string text = n < 0 ? "-" : "";
  for (size_t at = 0; at < digits.size(); ++at) {
    if (at > 0 && (digits.size() - at) % 3 == 0) text += ',';
    text += digits[at];
  }
  return text;
}

}  // namespace attncheck
