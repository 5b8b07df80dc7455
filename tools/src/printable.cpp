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

}  // namespace attncheck
