// attncheck: the command-line driver.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "attncheck/commands.hpp"

namespace {

struct Subcommand {
  const char* name;
  int (*run)(const std::vector<std::string>&);
  const char* summary;
};

const Subcommand kSubcommands[] = {
    {"check", attncheck::check_command, "the property suite and an oracle-differential campaign against an implementation"},
    {"compare", attncheck::compare_command, "tensors dumped from PyTorch or anywhere else against the oracle"},
    {"mutants", attncheck::mutants_command, "every planted bug against the properties: the kill matrix"},
    {"features", attncheck::features_command,
     "the features a kernel may claim, and their names (--python yes: the client's table)"},
    {"repro", attncheck::repro_command, "a replay file's finding as a standalone regression test (GoogleTest or pytest)"},
    {"mha-shapes", attncheck::mha_shapes_command,
     "the shapes and parameter counts of a multi-head attention layer and of the fully connected map it replaces"},
};

void list(std::FILE* to) {
  std::fprintf(to, "usage: attncheck SUBCOMMAND [--flag value ...]\n");
  for (const Subcommand& s : kSubcommands) std::fprintf(to, "  %-10s %s\n", s.name, s.summary);
  std::fprintf(to, "attncheck SUBCOMMAND --help lists its flags\n");
}

// What a subcommand printed must reach standard output: a report lost to a full disk is no verdict
// (exit 2, one line), unless the subcommand has already failed with its own line.
int finished(const char* command, int code) {
  if (code == 2 || (std::fflush(stdout) == 0 && !std::ferror(stdout))) return code;
  std::fprintf(stderr, "attncheck %s: standard output: cannot write (%s)\n", command, std::strerror(errno));
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + (argc > 1 ? 2 : 1), argv + argc);
  const std::string command = argc > 1 ? argv[1] : "";
  for (const Subcommand& s : kSubcommands)
    if (command == s.name) return finished(s.name, s.run(args));
  if (command == "--help") {
    list(stdout);
    return finished("--help", 0);
  }
  if (command.empty()) {
    list(stderr);
  } else {
    std::fprintf(stderr, "attncheck: unknown subcommand '%s' (attncheck --help lists them)\n", command.c_str());
  }
  return 2;
}
