// The flags of attncheck's subcommands, each declared once: parsing, its errors, the usage line
// and --help all come from the same declarations, so the help cannot disagree with the parser.
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace attncheck {

// The values of one command line: the given ones, else the declared defaults.
class FlagValues {
 public:
  bool given(const std::string& name) const { return given_.count(name) > 0; }
  // The value given, else the default; a flag with neither must be checked with given() first.
  const std::string& text(const std::string& name) const;
  double number(const std::string& name) const;
  // A yes-or-no flag's value (Flags::boolean): given bare or `yes`, true.
  bool on(const std::string& name) const { return text(name) == "yes"; }
  // Every value of a repeatable flag, in the order given (empty when not given).
  std::vector<std::string> all(const std::string& name) const;

 private:
  friend class Flags;
  std::map<std::string, std::string> given_, defaults_;
  std::map<std::string, std::vector<std::string>> all_;
};

// A subcommand's flags, of the form `--name value`, or a yes-or-no flag alone (`--keep-going`), e.g.
//   Flags("check").number("seconds", "N", "the search's budget", "60", 0, 1e9).choice("empty-rows", {"zero", "nan"}, "...")
class Flags {
 public:
  static constexpr double kUnbounded = std::numeric_limits<double>::infinity();

  explicit Flags(std::string command) : command_(std::move(command)) {}

  // Any non-empty text; `placeholder` names it in the usage line (FILE, builtin|PATH.so).
  Flags& text(std::string name, std::string placeholder, std::string help, std::optional<std::string> fallback = {});
  // A finite number from `least` to `most`.
  Flags& number(std::string name, std::string placeholder, std::string help, std::optional<std::string> fallback = {},
                double least = -kUnbounded, double most = kUnbounded);
  // One of `words`, which are its placeholder too (zero|nan).
  Flags& choice(std::string name, std::vector<std::string> words, std::string help, std::optional<std::string> fallback = {});
  // Yes or no, no by default: given bare (`--keep-going`, as make and cargo take such flags) it is
  // yes; `--keep-going yes` and `--keep-going no` still read as they say.
  Flags& boolean(std::string name, std::string help);
  // The flag declared last must be given.
  Flags& required();
  // The flag declared last may be given more than once (FlagValues::all); else the last one wins.
  Flags& repeatable();

  // Runs a subcommand on its arguments: `--help` among them prints the help (exit 0); a flag's
  // problem, or anything `body` throws, is one line on stderr (exit 2); else body's exit code.
  int run(const std::vector<std::string>& args, const std::function<int(const FlagValues&)>& body) const;

 private:
  struct Flag {
    std::string name, placeholder, help;
    std::optional<std::string> fallback = {};
    bool required = false;
    bool repeatable = false;
    bool is_number = false;
    bool is_boolean = false;  // may stand alone: yes
    double least = -kUnbounded, most = kUnbounded;
    std::vector<std::string> words = {};  // a choice's
  };
  Flags& add(Flag flag);
  const Flag* find(const std::string& dashed) const;
  // What its value must be, for errors: "a number from 0.01 to 1e9", "zero or nan", "FILE".
  static std::string needs(const Flag& flag);
  FlagValues parse(const std::vector<std::string>& args) const;
  std::string usage() const;
  std::string help() const;

  std::string command_;
  std::vector<Flag> flags_;
};

}  // namespace attncheck
