#include "attncheck/printable.hpp"

#include <cstdio>

namespace attncheck {

std::string printable(std::string_view text, size_t longest, bool lines) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < longest; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c >= 0x20 && c < 0x7f) || (lines && (c == '\n' || c == '\t'))) {
      out += char(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (text.size() > longest) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
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
