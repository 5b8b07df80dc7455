// attncheck: the command-line driver.
#include <cstdio>
#include <string>
#include <vector>

#include "attncheck/commands.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + (argc > 1 ? 2 : 1), argv + argc);
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "compare") return attncheck::compare_command(args);
  if (command == "check") return attncheck::check_command(args);
  if (command == "mutants") return attncheck::mutants_command(args);
  std::fprintf(stderr, "usage: attncheck check|compare|mutants [options] (see README.md)\n");
  return 2;
}
