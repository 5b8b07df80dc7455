#include "attncheck/flags.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace attncheck {
namespace {

// A problem with the command line, as opposed to one the subcommand meets running.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// 0.01, 60, 1e9: as a person writes them (%g alone gives 1e+09).
std::string number_text(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  std::string s = text;
  if (const size_t e = s.find('e'); e != std::string::npos) s = s.substr(0, e + 1) + std::to_string(std::atoi(&s[e + 1]));
  return s;
}

// "from 0.01 to 1e9", ">= 0", or empty for any finite number.
std::string range_text(double least, double most) {
  const bool low = std::isfinite(least), high = std::isfinite(most);
  if (low && high) return "from " + number_text(least) + " to " + number_text(most);
  if (low) return ">= " + number_text(least);
  if (high) return "<= " + number_text(most);
  return "";
}

// "none, upper-left or lower-right"
std::string one_of(const std::vector<std::string>& words) {
  std::string text;
  for (size_t n = 0; n < words.size(); ++n) text += (n == 0 ? "" : n + 1 == words.size() ? " or " : ", ") + words[n];
  return text;
}

}  // namespace

const std::string& FlagValues::text(const std::string& name) const {
  if (auto it = given_.find(name); it != given_.end()) return it->second;
  if (auto it = defaults_.find(name); it != defaults_.end()) return it->second;
  throw std::logic_error("--" + name + " has neither a value nor a default");
}

double FlagValues::number(const std::string& name) const { return std::strtod(text(name).c_str(), nullptr); }

std::vector<std::string> FlagValues::all(const std::string& name) const {
  const auto it = all_.find(name);
  return it == all_.end() ? std::vector<std::string>{} : it->second;
}

Flags& Flags::add(Flag flag) {
  flags_.push_back(std::move(flag));
  return *this;
}

Flags& Flags::text(std::string name, std::string placeholder, std::string help, std::optional<std::string> fallback) {
  return add(
      {.name = std::move(name), .placeholder = std::move(placeholder), .help = std::move(help), .fallback = std::move(fallback)});
}

Flags& Flags::number(std::string name, std::string placeholder, std::string help, std::optional<std::string> fallback,
                     double least, double most) {
  return add({.name = std::move(name),
              .placeholder = std::move(placeholder),
              .help = std::move(help),
              .fallback = std::move(fallback),
              .is_number = true,
              .least = least,
              .most = most});
}

Flags& Flags::choice(std::string name, std::vector<std::string> words, std::string help, std::optional<std::string> fallback) {
  std::string placeholder;
  for (const std::string& word : words) placeholder += (placeholder.empty() ? "" : "|") + word;
  return add({.name = std::move(name),
              .placeholder = std::move(placeholder),
              .help = std::move(help),
              .fallback = std::move(fallback),
              .words = std::move(words)});
}

Flags& Flags::boolean(std::string name, std::string help) {
  return add({.name = std::move(name),
              .placeholder = "[yes|no]",
              .help = std::move(help),
              .fallback = "no",
              .is_boolean = true,
              .words = {"yes", "no"}});
}

Flags& Flags::required() {
  flags_.back().required = true;
  return *this;
}

Flags& Flags::repeatable() {
  flags_.back().repeatable = true;
  return *this;
}

const Flags::Flag* Flags::find(const std::string& dashed) const {
  for (const Flag& flag : flags_)
    if (dashed == "--" + flag.name) return &flag;
  return nullptr;
}

std::string Flags::needs(const Flag& flag) {
  if (!flag.words.empty()) return one_of(flag.words);
  if (!flag.is_number) return flag.placeholder;
  const std::string range = range_text(flag.least, flag.most);
  return range.empty() ? "a finite number" : "a number " + range;
}

FlagValues Flags::parse(const std::vector<std::string>& args) const {
  FlagValues values;
  for (size_t n = 0; n < args.size(); n += 2) {
    const Flag* flag = find(args[n]);
    if (!flag) throw UsageError("unknown option '" + args[n] + "'");
    // A yes-or-no flag without yes or no after it stands alone: yes, and the next word is a flag.
    if (flag->is_boolean && (n + 1 >= args.size() || (args[n + 1] != "yes" && args[n + 1] != "no"))) {
      values.given_[flag->name] = "yes";
      n -= 1;  // (the loop's += 2 then steps one word)
      continue;
    }
    const std::string what = needs(*flag);
    // A flag right after another is the next flag, not this one's value.
    if (n + 1 >= args.size() || args[n + 1].empty() || find(args[n + 1])) throw UsageError(args[n] + " needs a value: " + what);
    const std::string& value = args[n + 1];
    if (flag->is_number) {
      char* end = nullptr;
      const double x = std::strtod(value.c_str(), &end);
      if (*end != '\0' || !std::isfinite(x) || x < flag->least || x > flag->most)
        throw UsageError(args[n] + " must be " + what + ", got '" + value + "'");
    }
    if (!flag->words.empty() && std::find(flag->words.begin(), flag->words.end(), value) == flag->words.end())
      throw UsageError(args[n] + " must be " + what + ", got '" + value + "'");
    values.given_[flag->name] = value;  // the last one wins: a script can override flags it passes on
    if (flag->repeatable) values.all_[flag->name].push_back(value);
  }
  for (const Flag& flag : flags_) {
    if (flag.required && !values.given(flag.name))
      throw UsageError("--" + flag.name + " " + flag.placeholder + " is required: " + flag.help);
    if (flag.fallback) values.defaults_[flag.name] = *flag.fallback;
  }
  return values;
}

std::string Flags::usage() const {
  std::string line = "usage: attncheck " + command_;
  for (const Flag& flag : flags_) {
    const std::string pair = "--" + flag.name + " " + flag.placeholder;
    line += " " + (flag.required ? pair : "[" + pair + "]");
  }
  return line;
}

std::string Flags::help() const {
  // Help in one column, unless one long flag would push it far right (compare's --causal).
  size_t width = 0;
  for (const Flag& flag : flags_) width = std::max(width, flag.name.size() + 3 + flag.placeholder.size());
  width = std::min<size_t>(width, 24);
  std::string text = usage() + "\n";
  for (const Flag& flag : flags_) {
    std::string pair = "--" + flag.name + " " + flag.placeholder;
    pair.resize(std::max(pair.size(), width), ' ');
    std::string notes = flag.required ? "required" : flag.fallback ? "default " + *flag.fallback : "";
    if (flag.repeatable) notes += std::string(notes.empty() ? "" : ", ") + "repeatable";
    if (const std::string range = flag.is_number ? range_text(flag.least, flag.most) : ""; !range.empty())
      notes += (notes.empty() ? "" : ", ") + range;
    text += "  " + pair + "  " + flag.help + (notes.empty() ? "" : " (" + notes + ")") + "\n";
  }
  return text;
}

int Flags::run(const std::vector<std::string>& args, const std::function<int(const FlagValues&)>& body) const {
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    std::printf("%s", help().c_str());
    return 0;
  }
  // Either way one line and exit 2, as scripts and the tests expect of every error.
  try {
    const FlagValues values = parse(args);
    return body(values);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "attncheck %s: %s (attncheck %s --help lists the flags)\n", command_.c_str(), e.what(),
                 command_.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attncheck %s: %s\n", command_.c_str(), e.what());
  }
  return 2;
}

}  // namespace attncheck
