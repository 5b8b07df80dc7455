#include "fuzz_input.hpp"

#include "attncheck/case_text.hpp"
#include "attncheck/precision.hpp"

#include <algorithm>
#include <cfloat>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>

namespace attncheck::fuzz {
namespace {

// Logits that break softmax kernels: infinities and NaN, the finite mask sentinels (-FLT_MAX,
// +-1e4, +-1e9), the edge of float exp's range (ln FLT_MAX = 88.72, ln of the smallest subnormal
// = -103.3), T's own extremes, the smallest normal and subnormal, and signed zeros.
template <class T>
T special_logit(Chooser& choose) {
  using limits = std::numeric_limits<T>;
  const T picks[] = {limits::infinity(),
                     -limits::infinity(),
                     limits::quiet_NaN(),
                     -limits::quiet_NaN(),
                     -FLT_MAX,
                     FLT_MAX,
                     -1e4f,
                     1e4f,
                     -1e9f,
                     1e9f,
                     88.72f,
                     88.73f,
                     -103.3f,
                     -104,
                     1e30f,
                     -1e30f,
                     limits::max(),
                     limits::lowest(),
                     limits::min(),
                     limits::denorm_min(),
                     -limits::denorm_min(),
                     T(0),
                     -T(0)};
  return picks[choose.below(std::size(picks))];
}

// Any bit pattern of T: every NaN payload, both infinities, subnormals, both zeros.
template <class T>
T arbitrary_bits(Chooser& choose) {
  using Bits = typename Precision<T>::Bits;
  const uint64_t most = std::numeric_limits<Bits>::max();  // below(most + 1), without overflow for 64 bits
  return Precision<T>::from_bits(Bits(choose.below(most == std::numeric_limits<uint64_t>::max() ? most : most + 1)));
}

constexpr int kKeptVersion = 1;
const std::string kKeptHead = "attncheck-fuzz ";

[[noreturn]] void bad(const std::string& what) { throw std::runtime_error("kept input: " + what); }

template <class X, class F>
std::string line(const char* name, const std::vector<X>& x, F word) {
  std::string text = name;
  for (const X& e : x) text += " " + word(e);
  return text + "\n";
}

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// The lines left in `in`, each as its first word and the rest: every one of `names` exactly once,
// no other (blank lines aside).
std::map<std::string, std::string> named_lines(std::istream& in, const std::vector<std::string>& names) {
  std::map<std::string, std::string> lines;
  for (std::string text; std::getline(in, text);) {
    std::istringstream words(text);
    std::string name, rest;
    if (!(words >> name)) continue;
    std::getline(words >> std::ws, rest);
    if (std::find(names.begin(), names.end(), name) == names.end()) bad("unknown line '" + name + "'");
    if (!lines.emplace(name, rest).second) bad("two '" + name + "' lines");
  }
  for (const std::string& name : names)
    if (!lines.count(name)) bad("no '" + name + "' line");
  return lines;
}

// A line's values of T, exactly `count` of them when count > 0.
template <class T>
std::vector<T> hex_values(const std::string& name, const std::string& rest, size_t count) {
  std::vector<T> x;
  for (const std::string& w : words_of(rest)) {
    const std::optional<T> value = from_hex<T>(w);
    if (!value) bad("'" + w + "' is not a bit pattern");
    x.push_back(*value);
  }
  if (x.empty() || (count > 0 && x.size() != count))
    bad(name + " holds " + std::to_string(x.size()) + " values" +
        (count > 0 ? ", the input needs " + std::to_string(count) : std::string()));
  return x;
}

int64_t index_word(const std::string& word, int64_t below, const std::string& what) {
  int64_t n = -1;
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), n);
  if (ec != std::errc() || end != word.data() + word.size() || n < 0 || n >= below)
    bad(what + " '" + word + "' is not in 0.." + std::to_string(below - 1));
  return n;
}

// After the case line (`line`): the case, the intervention and the poison.
template <class T>
void read_kept_body(const std::string& line, std::istream& in, AttentionInput<T>& out) {
  // Out: the case's Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv] and masks, and poison [Tk].
  out.c = case_from_text<T>(line, in);
  const Shape& s = out.c.shape;
  auto lines = named_lines(in, {"intervention", "poison"});
  const std::vector<std::string> at = words_of(lines["intervention"]);
  if (at.size() != 4 || at[0] != "b" || at[2] != "i") bad("the intervention line must read 'intervention b . i .'");
  out.b = index_word(at[1], s.B, "batch");
  out.i = index_word(at[3], s.Tq, "query");
  out.poison = hex_values<T>("poison", lines["poison"], size_t(s.Tk));
}

// After the row line (`line`): the logits and the mask.
template <class T>
void read_kept_body(const std::string& line, std::istream& in, SoftmaxRow<T>& out) {
  // Out: logits and allow [Tk].
  const std::vector<std::string> head = words_of(line);
  if (head.size() != 4 || head[0] != "row" || head[2] != "empty-rows" || (head[3] != "zero" && head[3] != "nan"))
    bad("the row line must read 'row float32|float64 empty-rows zero|nan'");
  out.empty = head[3] == "nan" ? EmptyRows::nan : EmptyRows::zero;
  auto lines = named_lines(in, {"logits", "allow"});
  out.logits = hex_values<T>("logits", lines["logits"], 0);
  if (out.logits.size() > size_t(kMaxSoftmaxLength))  // the check builds a [Tk,Tk] identity: keep it small
    bad("more than " + std::to_string(kMaxSoftmaxLength) + " logits");
  for (const std::string& w : words_of(lines["allow"])) {
    if (w != "0" && w != "1") bad("allow holds '" + w + "', not 0 or 1");
    out.allow.push_back(w == "1");
  }
  if (out.allow.size() != out.logits.size())
    bad("allow holds " + std::to_string(out.allow.size()) + " values for " + std::to_string(out.logits.size()) + " logits");
}

std::string kept_head(const char* target) { return kKeptHead + std::to_string(kKeptVersion) + " " + target + "\n"; }

}  // namespace

template <class T>
std::string kept_text(const AttentionInput<T>& in) {
  // in.c's Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv] and masks as case_to_text writes them; poison [Tk].
  return kept_head(in.target) + case_to_text(in.c) + "intervention b " + std::to_string(in.b) + " i " + std::to_string(in.i) +
         "\n" + line("poison", in.poison, hex_bits<T>);
}

template <class T>
std::string kept_text(const SoftmaxRow<T>& row) {
  // row: logits and allow [Tk].
  return kept_head(row.target) + "row " + Precision<T>::name + " empty-rows " + (row.empty == EmptyRows::nan ? "nan" : "zero") +
         "\n" + line("logits", row.logits, hex_bits<T>) +
         line("allow", row.allow, [](uint8_t a) { return std::string(a ? "1" : "0"); });
}

// Without coverage, and not inlined into code that has it: a kept text must reach no new edge.
#if defined(__clang__)
#define ATTNCHECK_NO_COVERAGE __attribute__((no_sanitize("coverage"), noinline))
#else
#define ATTNCHECK_NO_COVERAGE __attribute__((noinline))
#endif

ATTNCHECK_NO_COVERAGE bool is_kept_text(const uint8_t* data, size_t size) {
  return size >= kKeptHead.size() && std::memcmp(data, kKeptHead.data(), kKeptHead.size()) == 0;
}

ATTNCHECK_NO_COVERAGE int test_one_input(const uint8_t* data, size_t size, const char* target,
                                         int (*test)(const uint8_t*, size_t)) {
  if (!is_kept_text(data, size)) return test(data, size);
  static bool told = false;
  if (!told) std::fprintf(stderr, "%s: kept texts are checked by %s_replay, not here\n", target, target);
  told = true;
  return -1;
}

template <template <class> class Input>
std::variant<Input<float>, Input<double>> read_kept(std::istream& in) {
  std::string line, head, target;
  int version = 0;
  std::getline(in, line);
  std::istringstream(line) >> head >> version >> target;
  if (head + " " != kKeptHead) bad("the first line must read 'attncheck-fuzz 1 TARGET'");
  if (version != kKeptVersion)
    bad("format version " + std::to_string(version) + ", this attncheck reads " + std::to_string(kKeptVersion));
  if (target != Input<float>::target) bad("kept for " + target + ", not " + Input<float>::target);
  std::getline(in, line);  // "case float32 ..." or "row float32 ...": the precision decides T
  const std::vector<std::string> words = words_of(line);
  const std::string precision = words.size() > 1 ? words[1] : "";
  auto read = [&](auto input) -> std::variant<Input<float>, Input<double>> {
    read_kept_body(line, in, input);
    return input;
  };
  if (precision == Precision<double>::name) return read(Input<double>{});
  if (precision == Precision<float>::name) return read(Input<float>{});
  bad("the second line must name float32 or float64, not '" + line + "'");
}

template <class T>
SoftmaxRow<T> draw_softmax_row(Chooser& choose) {
  // Out: logits and allow [Tk], Tk = 1..kMaxSoftmaxLength.
  SoftmaxRow<T> row;
  row.empty = choose.below(2) == 1 ? EmptyRows::nan : EmptyRows::zero;
  const auto n = size_t(1 + choose.below(kMaxSoftmaxLength));
  row.logits.resize(n);
  row.allow.resize(n);
  for (size_t j = 0; j < n; ++j) {
    row.allow[j] = choose.below(2) == 0;
    switch (choose.below(3)) {
      case 0:
        row.logits[j] = T(int(choose.below(9)) - 4);
        break;
      case 1:
        row.logits[j] = special_logit<T>(choose);
        break;
      default:
        row.logits[j] = arbitrary_bits<T>(choose);
    }
  }
  return row;
}

template <class T>
AttentionInput<T> draw_attention_input(Chooser& choose, const CaseLimits& limits) {
  // Out: the case's Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv] and masks, and poison [Tk].
  AttentionInput<T> in;
  in.c = draw_case<T>(choose, limits);
  const Shape& s = in.c.shape;
  in.b = int64_t(choose.below(uint64_t(s.B)));
  in.i = int64_t(choose.below(uint64_t(s.Tq)));
  const T poisons[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                       -std::numeric_limits<T>::infinity(), T(1e30), T(-1e30)};
  in.poison.assign(size_t(s.Tk), T(0));
  for (int64_t j = 0; j < s.Tk; ++j)
    if (!in.c.permits(in.b, in.i, j))  // in the case's format: 1e30 is inf in f16
      in.poison[size_t(j)] = T(round_to(in.c.format, double(poisons[choose.below(std::size(poisons))])));
  return in;
}

bool showing() {
  static const bool show_inputs = std::getenv("ATTNCHECK_FUZZ_SHOW") != nullptr;
  return show_inputs;
}

void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

template SoftmaxRow<float> draw_softmax_row(Chooser&);
template SoftmaxRow<double> draw_softmax_row(Chooser&);
template AttentionInput<float> draw_attention_input(Chooser&, const CaseLimits&);
template AttentionInput<double> draw_attention_input(Chooser&, const CaseLimits&);
template std::string kept_text(const SoftmaxRow<float>&);
template std::string kept_text(const SoftmaxRow<double>&);
template std::string kept_text(const AttentionInput<float>&);
template std::string kept_text(const AttentionInput<double>&);
template std::variant<SoftmaxRow<float>, SoftmaxRow<double>> read_kept<SoftmaxRow>(std::istream&);
template std::variant<AttentionInput<float>, AttentionInput<double>> read_kept<AttentionInput>(std::istream&);

}  // namespace attncheck::fuzz
