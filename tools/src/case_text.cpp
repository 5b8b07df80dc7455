#include "attncheck/case_text.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "attncheck/call_scalars.hpp"
#include "attncheck/call_schema.hpp"
#include "attncheck/features.hpp"
#include "attncheck/policies.hpp"
#include "attncheck/precision.hpp"
#include "attncheck/printable.hpp"

namespace attncheck {
namespace {

constexpr int kVersion = 1;
constexpr int kShapeDims = int(Dim::D);  // the shape line's: Dim's up to a layer's D
// And after them a paged case's (NB, BS, BPS) and a varlen case's (S, its cu_seqlens' entries).
constexpr Dim kLayoutDims[] = {Dim::NB, Dim::BS, Dim::BPS, Dim::S};

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

// The line that holds a tensor: its feature's (features.hpp) when the feature brings it alone, else
// its own name (q, k and v; varlen's cu_seqlens_q and cu_seqlens_k).
std::string key_of(const Slot& s) {
  const auto same_feature = std::count_if(kSlots.begin(), kSlots.end(), [&](const Slot& t) { return t.feature == s.feature; });
  return s.feature && same_feature == 1 ? line_of(s.feature) : s.name;
}

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

// A scalar's word in a case text, by its type: a number's bits (%a), an integer, a causal
// alignment's name, a policy's choice (`key` the policy's flag).
std::string scalar_word(const char*, double x) {
  char word[40];
  std::snprintf(word, sizeof word, "%a", x);
  return word;
}
std::string scalar_word(const char*, int64_t x) { return std::to_string(x); }
std::string scalar_word(const char*, uint64_t x) { return std::to_string(x); }
std::string scalar_word(const char*, Causal x) { return causal_name(x); }
template <class E>
requires std::is_enum_v<E> std::string scalar_word(const char* key, E x) { return policy(key).choices[int(x)].word; }

// What a scalar's word may be, for a message: X for a number, N for an integer, else the names.
std::string scalar_choices(const char*, double) { return "X"; }
std::string scalar_choices(const char*, int64_t) { return "N"; }
std::string scalar_choices(const char*, uint64_t) { return "N"; }
std::string scalar_choices(const char*, Causal) {
  std::string names;
  for (Causal mode : kCausalModes) names += (names.empty() ? "" : "|") + std::string(causal_name(mode));
  return names;
}
template <class E>
requires std::is_enum_v<E> std::string scalar_choices(const char* key, E) {
  std::string words;
  for (int c = 0; c < policy(key).count; ++c) words += (c ? "|" : "") + std::string(policy(key).choices[c].word);
  return words;
}

// The options line and the feature lines of case c's scalars (call_scalars.def's text column).
template <class T>
std::string scalar_lines(const Case<T>& c) {
  const Case<T> plain;  // each scalar's default
  std::string options = "options";
  std::vector<std::pair<uint32_t, std::string>> lines;  // each feature line's capability and words
  std::vector<uint32_t> brought;                        // the feature lines written
  for_each_scalar_row([&](auto, auto in_case, auto, auto, ScalarRow row) {
    if constexpr (has_member<decltype(in_case), const Case<T>>) {
      if (row.text == ScalarRow::not_in_text) return;
      const bool plain_value = in_case(c) == in_case(plain);
      const std::string word = scalar_word(row.key, in_case(c));
      if (row.text == ScalarRow::option || (row.text == ScalarRow::option_unless_default && !plain_value))
        options += std::string(" ") + row.key + " " + word;
      if (!row.on_a_line()) return;
      if (lines.empty() || lines.back().first != row.feature) lines.push_back({row.feature, line_of(row.feature)});
      lines.back().second += " " + word;
      if (row.text == ScalarRow::on_line && !plain_value) brought.push_back(row.feature);
    }
  });
  std::string text = options + "\n";
  for (const auto& [line, words] : lines)
    if (std::find(brought.begin(), brought.end(), line) != brought.end()) text += words + "\n";
  return text;
}

}  // namespace

template <class T>
bool case_text_holds(const std::string& first_line) {
  return format_named<T>(case_text_precision(first_line)).has_value();
}

template <class T>
std::string case_to_text(const Case<T>& c) {
  const Shape& s = c.shape;
  std::string text = std::string("case ") + format_name(c.format) + " " + std::to_string(kVersion) + "\n";
  text += "shape";
  for (int d = 0; d < kShapeDims; ++d) text += std::string(" ") + kDimNames[d] + " " + std::to_string(dims_of(s)[Dim(d)]);
  for (const Dim d : kLayoutDims)
    if (dims_of(s)[d] > 0) text += std::string(" ") + kDimNames[int(d)] + " " + std::to_string(dims_of(s)[d]);
  text += "\n";
  text += scalar_lines(c);
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

// "shape B . H . H_kv . Tq . Tk . dk . dv .", each 1 to 4096: an attention shape's dims (not a layer's
// D); a paged case's then "NB . BS . BPS .", each 1 to 4096 too, and a varlen case's "S .", B + 1.
void read_shape(std::istringstream& line, Shape& s) {
  constexpr const char* kForm = "shape B . H . H_kv . Tq . Tk . dk . dv . [NB . BS . BPS .] [S .]";
  std::vector<std::string> words;  // key, value, key, value ...
  for (std::string w; line >> w;) words.push_back(w);
  size_t at = 0;
  Dims dims;
  auto next_is = [&](Dim d) { return at < words.size() && words[at] == kDimNames[int(d)]; };
  auto read = [&](Dim d) {
    if (!next_is(d) || at + 1 >= words.size()) bad(std::string("the shape line must read '") + kForm + "'");
    const std::string& value = words[at + 1];
    at += 2;
    dims[d] = integer(value);
    const int64_t most = d == Dim::S ? 4097 : 4096;  // S: B + 1
    if (dims[d] < 1 || dims[d] > most)
      bad(std::string(kDimNames[int(d)]) + " = " + value + " is outside 1.." + std::to_string(most));
  };
  for (int d = 0; d < kShapeDims; ++d) read(Dim(d));
  if (next_is(Dim::NB))
    for (const Dim d : {Dim::NB, Dim::BS, Dim::BPS}) read(d);
  if (next_is(Dim::S)) read(Dim::S);
  if (at != words.size()) bad(std::string("the shape line must read '") + kForm + "'");
  if (dims[Dim::S] > 0 && dims[Dim::S] != dims[Dim::B] + 1) bad("S = " + std::to_string(dims[Dim::S]) + " is not B + 1");
  set_dims(s, dims);
  if (std::string e = paging_error(s); !e.empty()) bad(e);
}

// The feature lines of the case text's scalars (call_scalars.def): their capabilities.
std::vector<uint32_t> scalar_line_capabilities() {
  std::vector<uint32_t> lines;
  for_each_scalar_row([&](auto, auto, auto, auto, ScalarRow row) {
    if (row.on_a_line() && (lines.empty() || lines.back() != row.feature)) lines.push_back(row.feature);
  });
  return lines;
}

// Whether a line may come before the shape line: one that holds no tensor (whose length the shape gives).
bool shapeless(const std::string& name) {
  if (name == "options" || name == "mix") return true;
  for (const uint32_t line : scalar_line_capabilities())
    if (name == line_of(line)) return true;
  return false;
}

// A scalar read from its word in a case text (scalar_word's inverse), or the reason it is none;
// `what` names it.
void read_scalar(const char*, const char* what, const std::string& w, double& x) { x = number(what, w); }
void read_scalar(const char*, const char*, const std::string& w, int64_t& x) { x = integer(w); }
void read_scalar(const char*, const char* what, const std::string& w, uint64_t& x) {
  char* end = nullptr;
  errno = 0;
  x = std::strtoull(w.c_str(), &end, 10);
  if (w.empty() || *end != '\0' || w[0] == '-' || errno == ERANGE) bad(std::string(what) + " '" + w + "' is not a 64-bit count");
}
void read_scalar(const char*, const char* what, const std::string& w, Causal& x) {
  for (Causal mode : kCausalModes)
    if (w == causal_name(mode)) return void(x = mode);
  bad(std::string(what) + " '" + w + "' is none of " + scalar_choices("", Causal::none));
}
template <class E>
requires std::is_enum_v<E>
void read_scalar(const char* key, const char* what, const std::string& w, E& x) {
  const std::optional<int> choice = policy_choice(policy(key), w);
  if (!choice) bad(std::string(what) + " '" + w + "' is none of " + choices_text(policy(key)));
  x = E(*choice);
}

// "options causal C scale X empty-rows E [lse-empty L]": each OPTION row's key and value in row
// order; an OPTION_UNLESS_DEFAULT one may be left out (its default).
template <class T>
void read_options(std::istringstream& words, Case<T>& c) {
  std::string grammar = "options";
  bool whole = true;
  for_each_scalar_row([&](auto, auto in_case, auto, auto, ScalarRow row) {
    if constexpr (has_member<decltype(in_case), Case<T>>) {
      if (!row.an_option()) return;
      const bool optional = row.text == ScalarRow::option_unless_default;
      grammar += std::string(optional ? " [" : " ") + row.key + " " + scalar_choices(row.key, in_case(c)) + (optional ? "]" : "");
      std::string key, value;
      if (!(words >> key)) {
        whole = whole && optional;
        return;
      }
      if (key != row.key || !(words >> value)) return void(whole = false);
      read_scalar(row.key, row.key, value, in_case(c));
    }
  });
  std::string more;
  if (!whole || words >> more) bad("the options line must read '" + grammar + "'");
}

// A line of the case's scalars beyond the options line (a feature's: a window, a soft-cap, dropout,
// call_scalars.def) or the mix, read into c; false for a line of another name.
template <class T>
bool read_option_line(const std::string& name, std::istringstream& words, Case<T>& c) {
  if (name == "mix") {
    std::getline(words >> std::ws, c.mix);
    return true;
  }
  bool read = false;
  for_each_scalar_row([&](auto, auto in_case, auto, auto, ScalarRow row) {
    if constexpr (has_member<decltype(in_case), Case<T>>) {
      if (!row.on_a_line() || name != line_of(row.feature)) return;
      std::string word;
      words >> word;
      read_scalar(row.key, name.c_str(), word, in_case(c));
      read = true;
    }
  });
  return read;
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
