// The attncheck command-line driver's subcommands. Each takes its arguments after the subcommand's
// name and returns the process exit code: 0 pass, 1 a finding, 2 usage or input error.
#pragma once

#include <string>
#include <vector>

namespace attncheck {

// attncheck compare --q Q.npy --k K.npy --v V.npy --out OUT.npy [--allow MASK.npy]
//   [--causal none|upper-left|lower-right] [--scale S] [--empty-rows zero|nan]
int compare_command(const std::vector<std::string>& args);

// attncheck check [--impl builtin|PATH.so] [--seconds N] [--seed S] [--precision f32|f64]
//   [--empty-rows zero|nan] [--json FILE] [--replay FILE] [--counterexample FILE] [--case-timeout S]
int check_command(const std::vector<std::string>& args);

// attncheck mutants --dir DIR [--seconds N] [--seed S] [--json FILE]: the kill matrix.
int mutants_command(const std::vector<std::string>& args);

}  // namespace attncheck
