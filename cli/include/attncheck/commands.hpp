// The attncheck command-line driver's subcommands. Each takes its arguments after the subcommand's
// name and returns the process exit code: 0 pass, 1 a finding, 2 usage or input error.
#pragma once

#include <string>
#include <vector>

namespace attncheck {

// Each declares its flags where it is defined; `attncheck SUBCOMMAND --help` lists them.
int compare_command(const std::vector<std::string>& args);     // tensors dumped as .npy against the oracle
int check_command(const std::vector<std::string>& args);       // the campaign against a kernel, or a replay
int mutants_command(const std::vector<std::string>& args);     // the kill matrix
int repro_command(const std::vector<std::string>& args);       // a finding as a regression test
int features_command(const std::vector<std::string>& args);    // the feature table
int mha_shapes_command(const std::vector<std::string>& args);  // a multi-head layer's shapes and counts

}  // namespace attncheck
