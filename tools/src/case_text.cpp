#include "attncheck/case_text.hpp"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <iterator>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "attncheck/call_schema.hpp"
#include "attncheck/features.hpp"
#include "attncheck/precision.hpp"
#include "attncheck/printable.hpp"

namespace attncheck {
namespace {

constexpr int kVersion = 1;

// One printable line, whatever the file held (a hostile word quoted in it is escaped and cut).
[[noreturn]] void bad(const std::string& what) { throw std::runtime_error("kept case: " + printable(what, 400)); }

// The line that carries a feature in a case text: its row's `text` (features.hpp).
std::string line_of(uint32_t capability) { return feature(capability).text; }

// The integer a word spells in decimal, the whole word.
long long integer(const std::string& w) {
  char* end = nullptr;
  const long long n = std::strtoll(w.c_str(), &end, 10);
  if (w.empty() || *end != '\0') bad("'" + w + "' is not an integer");
  return n;
}

// A tensor value of a kept case, or the reason it is not one.
template <class T>
T value_from_hex(const std::string& word) {
  const std::optional<T> x = from_hex<T>(word);
  if (!x) bad("'" + word + "' is not a bit pattern");
  return *x;
}

template <class X, class F>
void line(std::string& text, const std::string& name, const std::vector<X>& x, F word) {
  if (x.empty()) return;
  text += name;
  for (const X& e : x) text += " " + word(e);
  text += '\n';
}

// The words after a line's name, parsed by `word`, exactly `count` of them.
template <class X, class F>
std::vector<X> values(std::istringstream& words, const std::string& name, int64_t count, F word) {
  std::vector<X> x;
  for (std::string w; words >> w;) x.push_back(word(w));
  if (int64_t(x.size()) != count)
    bad(name + " holds " + std::to_string(x.size()) + " values, its shape needs " + std::to_string(count));
  return x;
}

}  // namespace

template <class T>
std::string hex_bits(T x) {
  using Bits = typename Precision<T>::Bits;
  char digits[2 * sizeof(Bits)];
  const auto [end, ec] = std::to_chars(std::begin(digits), std::end(digits), Precision<T>::to_bits(x), 16);
  return std::string(std::size(digits) - size_t(end - digits), '0') + std::string(digits, end);
}

template <class T>
std::optional<T> from_hex(const std::string& word) {
  using Bits = typename Precision<T>::Bits;
  Bits bits = 0;
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), bits, 16);
  if (word.empty() || word.size() > 2 * sizeof(Bits) || ec != std::errc() || end != word.data() + word.size())
    return std::nullopt;
  return Precision<T>::from_bits(bits);
}

std::string case_text_precision(const std::string& first_line) {
  std::istringstream words(first_line);
  std::string head, precision;
  words >> head >> precision;
  return head == "case" ? precision : "";
}

namespace {

// The format a case text's precision word names, if T holds it: T's own, or f16 or bf16 for float.
template <class T>
std::optional<Format> format_named(const std::string& precision) {
  for (Format f : kFormats)
    if (precision == format_name(f) && (f == Precision<T>::format || (std::is_same_v<T, float> && is_narrow(f)))) return f;
  return std::nullopt;
}

// The line that holds a tensor: its feature's (features.hpp), or for q, k and v its own name.
std::string key_of(const Slot& s) { return s.feature ? line_of(s.feature) : s.name; }

// A tensor's values as words: the bits of each in the case's format.
template <class T>
std::string format_hex(Format format, T x) {
  if (!is_narrow(format)) return hex_bits<T>(x);
  return visit_narrow(format, [x](auto zero) { return hex_bits(Precision<decltype(zero)>::from_double(double(x))); });
}
template <class T>
T format_from_hex(Format format, const std::string& word) {
  if (!is_narrow(format)) return value_from_hex<T>(word);
  return T(visit_narrow(format, [&](auto zero) {
    using F = decltype(zero);
    const std::optional<F> x = from_hex<F>(word);
    if (!x) bad("'" + word + "' is not a bit pattern of " + Precision<F>::name);
    return Precision<F>::to_double(*x);
  }));
}

// One value of slot s as a word: its bits in the case's format (Element::format) or its own
// (wide), or an integer (int32, and a mask's byte).
template <class X>
std::string word_of(const Slot& s, Format format, X x) {
  if constexpr (std::is_integral_v<X>)
    return std::to_string(int64_t(x));
  else
    return s.element == Element::format ? format_hex(format, x) : hex_bits(x);
}
template <class X>
X value_of(const Slot& s, Format format, const std::string& word) {
  if constexpr (std::is_same_v<X, uint8_t>)
    return uint8_t(integer(word) != 0);
  else if constexpr (std::is_integral_v<X>) {
    const long long n = integer(word);
    if (n != static_cast<long long>(static_cast<X>(n))) bad("'" + word + "' does not fit a " + s.name + " value");
    return X(n);
  } else
    return s.element == Element::format ? format_from_hex<X>(format, word) : value_from_hex<X>(word);
}

}  // namespace

template <class T>
bool case_text_holds(const std::string& first_line) {
  return format_named<T>(case_text_precision(first_line)).has_value();
}

template <class T>
std::string case_to_text(const Case<T>& c) {
  const Shape& s = c.shape;
  char scale[40];
  std::snprintf(scale, sizeof scale, "%a", c.scale);
  std::string text = std::string("case ") + format_name(c.format) + " " + std::to_string(kVersion) + "\n";
  text += "shape B " + std::to_string(s.B) + " H " + std::to_string(s.H) + " H_kv " + std::to_string(s.kv_heads()) + " Tq " +
          std::to_string(s.Tq) + " Tk " + std::to_string(s.Tk) + " dk " + std::to_string(s.dk) + " dv " + std::to_string(s.dv) +
          "\n";
  // lse-empty only when it is not the default, so that every case written before it reads the same.
  text += std::string("options causal ") + causal_name(c.causal) + " scale " + scale + " empty-rows " +
          empty_rows_word(c.empty_rows) + (c.lse_empty == LseEmpty::zero ? " lse-empty zero" : "") + "\n";
  if (c.window_left >= 0 || c.window_right >= 0)  // lines beyond ABI v1's features appear only when used
    text += line_of(ATTNCHECK_CAP_WINDOW) + " " + std::to_string(c.window_left) + " " + std::to_string(c.window_right) + "\n";
  if (c.softcap != 0) {
    char softcap[40];
    std::snprintf(softcap, sizeof softcap, "%a", c.softcap);
    text += line_of(ATTNCHECK_CAP_SOFTCAP) + " " + softcap + "\n";
  }
  if (c.dropout_p != 0) {
    char rate[40];
    std::snprintf(rate, sizeof rate, "%a", c.dropout_p);
    text += line_of(ATTNCHECK_CAP_DROPOUT) + " " + rate + " " + std::to_string(c.dropout_seed) + "\n";
  }
  text += "mix " + c.mix + "\n";
  for_each_case_input(
      c, [&](const Slot& s, const auto& x) { line(text, key_of(s), x, [&](auto e) { return word_of(s, c.format, e); }); });
  return text + "end\n";
}

namespace {

// A case line's format: "case <precision> <version>", the precision one T holds, the version this one.
template <class T>
Format format_of_case_line(const std::string& first_line) {
  std::istringstream head(first_line);
  std::string word, precision;
  int version = 0;
  head >> word >> precision >> version;
  if (word != "case") bad("expected a 'case' line, got '" + first_line + "'");
  const std::optional<Format> format = format_named<T>(precision);
  if (!format) bad("a " + precision + " case where a " + Precision<T>::name + " one was expected");
  if (version != kVersion)
    bad("format version " + std::to_string(version) + ", this attncheck reads " + std::to_string(kVersion));
  return *format;
}

// The number a word spells (strtod's: hexadecimal floats, inf, nan); `what` names it when it is none.
double number(const std::string& what, const std::string& w) {
  char* end = nullptr;
  const double x = std::strtod(w.c_str(), &end);
  if (w.empty() || *end != '\0') bad(what + " '" + w + "' is not a number");
  return x;
}

// "shape B . H . H_kv . Tq . Tk . dk . dv .", each 1 to 4096.
void read_shape(std::istringstream& words, Shape& s) {
  std::string key;
  int64_t* dims[] = {&s.B, &s.H, &s.H_kv, &s.Tq, &s.Tk, &s.dk, &s.dv};
  const char* keys[] = {"B", "H", "H_kv", "Tq", "Tk", "dk", "dv"};
  for (int n = 0; n < 7; ++n) {
    std::string value;
    if (!(words >> key >> value) || key != keys[n]) bad("the shape line must read 'shape B . H . H_kv . Tq . Tk . dk . dv .'");
    *dims[n] = integer(value);
    if (*dims[n] < 1 || *dims[n] > 4096) bad(std::string(keys[n]) + " = " + value + " is outside 1..4096");
  }
}

// Whether a line may come before the shape line: one that holds no tensor (whose length the shape gives).
bool shapeless(const std::string& name) {
  return name == "options" || name == "mix" || name == line_of(ATTNCHECK_CAP_WINDOW) || name == line_of(ATTNCHECK_CAP_SOFTCAP) ||
         name == line_of(ATTNCHECK_CAP_DROPOUT);
}

// "options causal C scale X empty-rows E [lse-empty L]": without lse-empty, ninf (the default).
template <class T>
void read_options(std::istringstream& words, Case<T>& c) {
  std::string causal, scale, empty, k1, k2, k3, k4, lse_empty, more;
  words >> k1 >> causal >> k2 >> scale >> k3 >> empty >> k4 >> lse_empty >> more;
  int mode = -1;
  for (int m = 0; m < 3; ++m)
    if (causal == causal_name(Causal(m))) mode = m;
  const auto empty_choice = policy_choice(policy("empty-rows"), empty);
  const auto lse_choice = k4.empty() ? std::optional<int>(0) : policy_choice(policy("lse-empty"), lse_empty);
  if (k1 != "causal" || k2 != "scale" || k3 != "empty-rows" || mode < 0 || !empty_choice || (!k4.empty() && k4 != "lse-empty") ||
      !lse_choice || !more.empty())
    bad("the options line must read 'options causal none|upper-left|lower-right scale X empty-rows "
        "zero|nan|mean|any [lse-empty ninf|zero]'");
  c.causal = Causal(mode);
  c.scale = number("scale", scale);
  c.empty_rows = EmptyRows(*empty_choice);
  c.lse_empty = LseEmpty(*lse_choice);
}

// A line of one option beyond the options line (a window, a soft-cap, dropout) or the mix, read into
// c; false for a line of another name.
template <class T>
bool read_option_line(const std::string& name, std::istringstream& words, Case<T>& c) {
  if (name == line_of(ATTNCHECK_CAP_WINDOW)) {
    std::string left, right;
    words >> left >> right;
    c.window_left = integer(left);
    c.window_right = integer(right);
  } else if (name == line_of(ATTNCHECK_CAP_SOFTCAP)) {
    std::string cap;
    words >> cap;
    c.softcap = number("softcap", cap);
  } else if (name == line_of(ATTNCHECK_CAP_DROPOUT)) {
    std::string rate, seed;
    words >> rate >> seed;
    c.dropout_p = number("dropout rate", rate);
    char* end = nullptr;
    errno = 0;
    c.dropout_seed = std::strtoull(seed.c_str(), &end, 10);
    if (seed.empty() || *end != '\0' || seed[0] == '-' || errno == ERANGE)
      bad("dropout seed '" + seed + "' is not a 64-bit count");
  } else if (name == "mix") {
    std::getline(words >> std::ws, c.mix);
  } else {
    return false;
  }
  return true;
}

// A tensor's line (an input slot's, call_schema.hpp), as many values as the shape gives it, read
// into c; false for a line of another name.
template <class T>
bool read_tensor_line(const std::string& name, std::istringstream& words, Case<T>& c) {
  bool read = false;
  for_each_case_input(c, [&](const Slot& s, auto& x) {
    using X = typename std::remove_reference_t<decltype(x)>::value_type;
    if (read || name != key_of(s)) return;
    x = values<X>(words, name, elements(s, dims_of(c.shape)), [&](const std::string& w) { return value_of<X>(s, c.format, w); });
    read = true;
  });
  return read;
}

// A case read up to its end line is whole: its shape and options lines, q, k and v, every tensor
// as long as the shape says, and a problem the contract takes.
template <class T>
void check_whole(const Case<T>& c, bool shaped, bool optioned) {
  const Shape& s = c.shape;
  if (!shaped) bad("no shape line");
  if (!optioned) bad("no options line");
  // Every tensor against the one shape (a shape line comes once, before them: checked below too).
  for_each_case_input(c, [&](const Slot& slot, const auto& x) {
    if (x.empty() && slot.role(CallKind::forward) == Role::in) bad(std::string(slot.name) + " is required");
    if (!x.empty() && int64_t(x.size()) != elements(slot, dims_of(s))) bad("a tensor's length does not fit the shape");
  });
  for (const int32_t n : c.key_lengths)
    if (n < 0 || n > s.Tk) bad("key length " + std::to_string(n) + " is outside 0..Tk");
  Problem<T> p = c.problem();
  std::vector<T> out(1);
  if (const std::string error = problem_error(p, Result<T>{out.data()}); !error.empty()) bad(error);
}

}  // namespace

template <class T>
Case<T> case_from_text(const std::string& first_line, std::istream& in) {
  Case<T> c;
  c.format = format_of_case_line<T>(first_line);
  bool shaped = false, optioned = false;  // both lines are required: a case without either means another case
  for (std::string text; std::getline(in, text);) {
    std::istringstream words(text);
    std::string name;
    words >> name;
    if (name == "end") {
      check_whole(c, shaped, optioned);
      return c;
    }
    if (name == "shape") {
      if (shaped) bad("a second shape line");
      read_shape(words, c.shape);
      shaped = true;
    } else if (!shaped && !shapeless(name)) {
      bad("'" + name + "' before the shape line");
    } else if (name == "options") {
      read_options(words, c);
      optioned = true;
    } else if (!read_option_line(name, words, c) && !read_tensor_line(name, words, c)) {
      bad("unknown line '" + name + "'");
    }
  }
  bad("no 'end' line");
}

template std::string hex_bits(float);
template std::string hex_bits(double);
template std::string hex_bits(Half);
template std::string hex_bits(BFloat16);
template std::optional<float> from_hex(const std::string&);
template std::optional<double> from_hex(const std::string&);
template std::optional<Half> from_hex(const std::string&);
template std::optional<BFloat16> from_hex(const std::string&);
template std::string case_to_text(const Case<float>&);
template std::string case_to_text(const Case<double>&);
template Case<float> case_from_text(const std::string&, std::istream&);
template Case<double> case_from_text(const std::string&, std::istream&);
template bool case_text_holds<float>(const std::string&);
template bool case_text_holds<double>(const std::string&);

}  // namespace attncheck
