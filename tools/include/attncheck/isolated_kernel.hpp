// An implementation run in a child process, so that a crash, a hang, a stray write or a broken
// protocol is reported as a finding and never takes the checker down. The child is started once
// and reused (restarted after a fault); the checker talks to it in the child protocol
// (protocol.hpp, docs/protocol.md). Two kinds of child: the plugin host, forked from the checker,
// which loads a plugin and hands it every buffer against guard pages (PROT_NONE) with canary bytes
// in the slack before and after, inputs read-only, and watches the process's floating-point mode
// before and after loading and after every call (fp_mode.hpp); and any command (`--impl-cmd`,
// the Python client), run by /bin/sh in a process group of its own, its stderr kept for the findings.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attncheck/cases.hpp"
#include "attncheck/fp_mode.hpp"
#include "attncheck/layer_cases.hpp"
#include "attncheck/patience.hpp"
#include "attncheck/plugin.h"
#include "attncheck/protocol.hpp"

namespace attncheck {

// What became of one call.
struct Outcome {
  // not_taken: a command's NTKN (the Python client's NotExpressible): no finding, and counted.
  // out_of_budget: the call was still running when the run's budget ended (set_budget_end): no verdict.
  enum Kind { ok, refused, crashed, hung, exited, stray_write, raised, broke_protocol, not_taken, out_of_budget } kind = ok;
  int32_t status = 0;  // the plugin's return (refused), the signal (crashed), the exit status (exited)
  // raised: a command's FAIL (a Python exception); broke_protocol: bytes that are not the protocol's;
  // not_taken: its reason.
  std::string detail;  // one line a person can read
};

class IsolatedKernel {
 public:
  // `which`: "builtin" (the built-in implementation through ABI v2) or a plugin's path; with
  // `command`, a shell command line that speaks the protocol on its stdin and stdout.
  IsolatedKernel(std::string which, double case_timeout_seconds, bool command = false);
  ~IsolatedKernel();
  IsolatedKernel(const IsolatedKernel&) = delete;
  IsolatedKernel& operator=(const IsolatedKernel&) = delete;

  // Starts the child (which loads the plugin, or runs the command) and reads its HELO; throws
  // std::runtime_error with the loader's one-line reason (missing file, missing symbol, wrong
  // version), the command's FAIL, or the child's fate, with a command's stderr.
  void start();
  // The plugin's ABI version (1 or 2) and capabilities (ABI v2's bits; a v1 plugin's as loaded).
  int32_t version() const { return version_; }
  uint32_t capabilities() const { return capabilities_; }
  bool has_f64() const { return capabilities_ & ATTNCHECK_CAP_F64; }
  // What it takes within its claims: its restrictions and limits (domain.hpp), as its HELO said them.
  const Domain& domain() const { return domain_; }
  // The first change the library made to the process's floating-point mode, as it loaded or in a
  // call, as a one-line finding; empty when it left the mode alone.
  const std::string& fp_mode_finding() const { return fp_mode_finding_; }
  // What a command wrote to its stderr as it started, before its HELO (an adapter's line naming the
  // library and version it calls), trailing newlines cut; empty for a plugin.
  const std::string& said_at_start() const { return said_at_start_; }
  // What a command wrote to its stderr since the last call of this (the last 8 KiB of it; a
  // Python traceback), or empty; a plugin's stderr is the checker's own.
  std::string take_stderr();

  // With `adaptive`, a call's limits are learnt from calls so far (patience.hpp): ten times the CPU
  // time the slowest call of its kind (format, features, forward, backward or layer) on a problem at
  // least as large took, at least 1 s (a command: 10 s, for a session built or a function compiled
  // per shape), and at most the constructor's timeout, which the first call of each kind since the
  // child started gets (a JIT compiling, a library loading); a call past a learnt limit is run again
  // in a new child before it is a hang. Without it, every call gets the constructor's timeout, in
  // CPU time or time blocked. A kernel that hangs on one shape costs seconds, not the whole timeout.
  void adapt_timeout(bool adaptive) {
    adaptive_ = adaptive;
    patience_.learn(adaptive);
  }
  // No call runs past `steady_seconds` (protocol::deadline_after's clock): one still running then is
  // stopped as Outcome::out_of_budget, not as a hang. Infinity (the default): no such end.
  void set_budget_end(double steady_seconds) { budget_end_ = steady_seconds; }
  // Likewise once `stop` returns true (asked every tenth of a second of a call): another worker's
  // earlier finding, which makes this one's run moot.
  void stop_when(std::function<bool()> stop) { stop_when_ = std::move(stop); }

  // Runs case c into out [B,H,Tq,dv] and, when lse is given (a v2 plugin claiming it), lse [B,H,Tq];
  // with dropout and keep given (ATTNCHECK_CAP_DROPOUT_MASK), the keep mask [B,H,Tq,Tk], each byte
  // protocol::kUnwrittenKeep unless written. A v1 plugin gets what ABI v1 carries (key lengths folded into allow).
  template <class T>
  Outcome run(const Case<T>& c, std::vector<T>& out, std::vector<T>* lse = nullptr, std::vector<uint8_t>* keep = nullptr);
  // Runs the backward of case c (a plugin claiming ATTNCHECK_CAP_BACKWARD): grads' out, lse and dout
  // in, its dq, dk and dv written (sized by the caller).
  template <class T>
  Outcome run_backward(const Case<T>& c, const Grads<T>& grads);
  // Runs layer case c (a kernel claiming ATTNCHECK_CAP_MHA) into out [B,Tq,D] and, when given
  // (ATTNCHECK_CAP_MHA_WEIGHTS), weights [B,H,Tq,Tk].
  template <class T>
  Outcome run_layer(const LayerCase<T>& c, std::vector<T>& out, std::vector<T>* weights = nullptr);

 private:
  // One call held in `abi` (its request and buffers read off it, call_schema.hpp), of `kind`,
  // carrying `features` (capability bits) and a layer's `parts`.
  Outcome exchange(protocol::AbiStructs& abi, CallKind kind, uint32_t features, uint32_t parts, const char* entry_point);
  // One call: the request (a PROB's headers), its input buffers and where its written ones go,
  // both in the protocol's buffer order; entry_point names the call in a floating-point-mode finding.
  Outcome exchange(const protocol::Request& request, const void* const (&buffers)[protocol::kBuffers],
                   void* const (&into)[protocol::kBuffers], const char* entry_point);
  // One run of a call within `limits`; exchange runs a call again that hung past learnt limits.
  Outcome exchange_once(const protocol::Request& request, const void* const (&buffers)[protocol::kBuffers],
                        void* const (&into)[protocol::kBuffers], const char* entry_point, const CallLimits& limits);
  struct Frame;  // one frame from the child as receive reads it, and its steps (isolated_kernel.cpp)
  // Reads one frame: how the call (or, given hello, the start) ended, or nothing yet (MODE, STRY).
  std::optional<Outcome> receive(const char* during, const protocol::Deadline& deadline, const void* request,
                                 void* const (&into)[protocol::kBuffers], const char* entry_point, protocol::Hello* hello);
  void stop();
  Outcome fate(const char* waiting_for);            // how the child ended, once it closed its end of a pipe
  Outcome hung(const char* during);                 // kills the child that passed its limits (watch_'s, or the start's)
  static Outcome budget_ended(const char* during);  // out_of_budget: no verdict on the call
  // Whether the run's budget has ended or a stop was asked for (a signal, stop_when): no call is
  // sent and no child started (a restart of a command costs seconds) past it.
  bool past_budget() const;
  bool told_to_stop() const;

  std::string which_;
  double timeout_;
  bool adaptive_ = false;
  double start_timeout_ = 0;  // the start's, on the wall clock, for its hang's report
  double budget_end_ = std::numeric_limits<double>::infinity();
  bool cut_by_budget_ = false;  // this call's deadline is the budget's end, not its limit
  std::function<bool()> stop_when_;
  Patience patience_;
  std::optional<CallWatch> watch_;  // this call's; none while starting
  bool command_;
  int stderr_fd_ = -1;                 // a command's stderr, an unlinked file
  std::pair<int, int> stray_{-1, -1};  // this call's STRY: the buffer, and 0 before / 1 past it
  bool have_mode_ = false;             // a MODE came since the child started
  pid_t child_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string said_at_start_;
  int32_t version_ = 0;
  uint32_t capabilities_ = 0;
  Domain domain_;
  FpMode mode_;  // the child's floating-point mode as last reported
  std::string fp_mode_finding_;
};

}  // namespace attncheck
