#include "attncheck/implementation.hpp"

#include <stdexcept>

#include "attncheck/printable.hpp"

namespace attncheck {

Flags& implementation_flags(Flags& flags) {
  return flags
      .text("impl", "builtin|PATH.so",
            "the implementation: the built-in one (the default), or a plugin built against contract/include/attncheck/plugin.h")
      .text("impl-cmd", "COMMAND",
            "the implementation: a command (run by /bin/sh) that speaks the child protocol of docs/protocol.md on its "
            "stdin and stdout, e.g. 'python3 my_attention.py' serving a function with attncheck.serve")
      .boolean("trust-replay",
               "with --replay and neither --impl nor --impl-cmd: run the implementation the replay file names (a file "
               "is data: what it names runs only when you say so)");
}

bool named_implementation(const FlagValues& given, CampaignOptions& options) {
  if (given.given("impl") && given.given("impl-cmd")) throw std::runtime_error("give --impl or --impl-cmd, not both");
  if (!given.given("impl") && !given.given("impl-cmd")) return false;
  options.command = given.given("impl-cmd");
  const std::string flag = options.command ? "impl-cmd" : "impl";
  options.impl = given.text(flag);
  if (options.impl.find_first_of("\n\r") != std::string::npos)
    throw std::runtime_error("--" + flag + " holds a line break ('" + printable(options.impl, 80) +
                             "'): a replay file keeps it on one line, where it would name another implementation");
  return true;
}

void require_trusted(const FlagValues& given, const std::string& replay, const CampaignOptions& options) {
  if (given.on("trust-replay")) return;
  throw std::runtime_error(replay + " names the implementation " + (options.command ? "command '" : "'") +
                           printable(options.impl, 200) +
                           "', which attncheck does not run because a file names it: give --impl or --impl-cmd, or "
                           "--trust-replay yes to run it");
}

}  // namespace attncheck
