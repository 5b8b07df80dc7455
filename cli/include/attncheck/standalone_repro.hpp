// attncheck repro --standalone: a finding of an adapter (python -m attncheck.adapters.NAME, the
// attention people run) as a Python script that needs only NumPy and the library: the problem as
// exact bit patterns, the adapter's own source and options, the oracle's values and bound.
#pragma once

#include <string>
#include <vector>

namespace attncheck {

// The kept call a standalone script reproduces: the replay file it came from, the command it was
// run with, the property and why the call was wrong (a case text, as replay files keep it).
struct StandaloneCall {
  std::string replay, command, property, case_text, why;
  bool with_lse = false;
};

// The adapter a command runs and its options: the words after `-m attncheck.adapters.NAME`. A
// command of anything else, or one quoted or escaped for the shell, is an error saying so.
struct AdapterCall {
  std::string name;
  std::vector<std::string> options;
};
AdapterCall adapter_call(const std::string& command);

// The script, or an error naming what it cannot reproduce.
std::string standalone_script(const StandaloneCall& call);

}  // namespace attncheck
