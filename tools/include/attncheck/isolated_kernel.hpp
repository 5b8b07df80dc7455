// An implementation run in a child process, so that a crash, a hang or a stray write is reported
// as a finding and never takes the checker down. The child is forked once and reused; every
// buffer it hands the implementation sits against guard pages (PROT_NONE) with canary bytes in
// the slack before and after, and inputs are read-only. The child also watches the process's
// floating-point mode before and after loading and after every call (fp_mode.hpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "attncheck/cases.hpp"
#include "attncheck/fp_mode.hpp"
#include "attncheck/plugin.h"

namespace attncheck {

// What became of one call.
struct Outcome {
  enum Kind { ok, refused, crashed, hung, exited, stray_write } kind = ok;
  int32_t status = 0;  // the plugin's return (refused), the signal (crashed), the exit status (exited)
  std::string detail;  // one line a person can read
};

class IsolatedKernel {
 public:
  // `which`: "builtin" (the built-in implementation through ABI v1) or a plugin's path.
  IsolatedKernel(std::string which, double case_timeout_seconds);
  ~IsolatedKernel();
  IsolatedKernel(const IsolatedKernel&) = delete;
  IsolatedKernel& operator=(const IsolatedKernel&) = delete;

  // Starts the child and loads the plugin there; throws std::runtime_error with the loader's
  // one-line reason (missing file, missing symbol, wrong version) or the child's fate.
  void start();
  // The plugin's ABI version (1 or 2) and capabilities (ABI v2's bits; a v1 plugin's as loaded).
  int32_t version() const { return version_; }
  uint32_t capabilities() const { return capabilities_; }
  bool has_f64() const { return capabilities_ & ATTNCHECK_CAP_F64; }
  // The first change the library made to the process's floating-point mode, as it loaded or in a
  // call, as a one-line finding; empty when it left the mode alone.
  const std::string& fp_mode_finding() const { return fp_mode_finding_; }

  // Runs case c into out [B,H,Tq,dv] and, when lse is given (a v2 plugin claiming it), lse [B,H,Tq].
  // A v1 plugin gets what ABI v1 carries (key lengths folded into allow).
  template <class T>
  Outcome run(const Case<T>& c, std::vector<T>& out, std::vector<T>* lse = nullptr);
  // Runs the backward of case c (a plugin claiming ATTNCHECK_CAP_BACKWARD): grads' out, lse and dout
  // in, its dq, dk and dv written (sized by the caller).
  template <class T>
  Outcome run_backward(const Case<T>& c, const Grads<T>& grads);

 private:
  // One call: the request (the child protocol's), its input buffers and where its written ones go,
  // both in the protocol's buffer order; entry_point names the call in a floating-point-mode finding.
  Outcome exchange(const void* request, const void* const (&buffers)[12], void* const (&into)[12], const char* entry_point);
  void stop();
  Outcome fate(const char* waiting_for);

  std::string which_;
  double timeout_;
  pid_t child_ = -1;
  int to_child_ = -1, from_child_ = -1;
  int32_t version_ = 0;
  uint32_t capabilities_ = 0;
  FpMode mode_;  // the child's floating-point mode as last reported
  std::string fp_mode_finding_;
};

}  // namespace attncheck
