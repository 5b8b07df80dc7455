// A replay file (`attncheck check --counterexample`): a finding kept as data, read back by `check
// --replay` and `repro`, kept in corpus/regressions/check/ and shared. Format 2, one item a line:
//   attncheck-replay 2
//   property ShiftInvarianceOfSoftmax
//   impl build/my_plugin.so             (or: impl-cmd python3 my_kernel.py)
//   empty-rows zero                     (a line per policy, policies.hpp)
//   lse-empty ninf
//   masked-inputs any
//   restrictions causal default_scale   (the kernel's domain when it was found, domain.hpp's words;
//   limits head_dims 32,64 max_Tk 512    optional, none when it took every problem it claimed)
//   case float32 1 ... end              (the case as exact bits, case_text.hpp; none for a fixed property)
//   choices 3 0 1                       (the property's other choices)
//   failed-call case ... end            (the call the oracle found wrong, each line prefixed; optional)
//   failed-call-why out[0,0,1,0] outside the bound (error/bound 44)
//   failed-call-lse no
// Format 1 (the generator's choices alone, no case) still reads. A file is data: reading one runs
// nothing and trusts nothing; every field is checked, and a file that is not whole is an error.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "attncheck/contract.hpp"
#include "attncheck/domain.hpp"

namespace attncheck {

struct ReplayFile {
  bool operator==(const ReplayFile&) const = default;
  int format = 2;
  std::string property;
  std::string impl;  // a plugin's path or "builtin"; with command, a command line
  bool command = false;
  Policies policies;      // a line each (empty-rows required; the others, from later files, optional)
  Domain domain{};        // what the kernel said it takes (a record: a replay asks the kernel again)
  std::string case_text;  // "case ... end\n", checked; empty for a property that draws no case
  std::vector<uint64_t> choices;
  std::string failed_call, failed_call_why;  // the case text (checked) and why; both empty when not kept
  bool failed_call_lse = false;
};

// The largest file read: the largest case the generator draws, with its failed call, as text is
// well under it. Larger is an error before anything is read.
inline constexpr uint64_t kLongestReplayFile = uint64_t(1) << 31;

// Parses a replay file's text; `name` prefixes every error, which is one line (std::runtime_error).
ReplayFile parse_replay(std::istream& in, const std::string& name);
// Reads a regular file (a FIFO or device is refused, never waited on) of at most kLongestReplayFile bytes.
ReplayFile read_replay_file(const std::string& path);
// Its text, as write_replay_file writes it; parse_replay reads it back to `r` (fuzz_replay checks).
std::string replay_text(const ReplayFile& r);
// Writes `r` into a file of its own renamed over `path` once whole and closed, so that a full disk
// leaves no empty or partial file behind a report that names it, and two checks writing one path
// never mix; a path that is no regular file (/dev/full, a pipe) is written in place.
void write_replay_file(const std::string& path, const ReplayFile& r);

}  // namespace attncheck
