// How long a call to the child may go on before it is a hang, judged by the work the child does,
// not by the wall clock: another process's load stretches a call's wall time, never its CPU time.
// A call is hung when its child has used far more CPU time than calls of its kind and size took,
// or none for a long while with nothing runnable (blocked: a sleep, a deadlock), or at the ceiling
// (--case-timeout). A hang past a limit learnt from calls so far is run again before it counts
// (IsolatedKernel::exchange). Measured on a loaded machine: docs/checking.md.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "attncheck/protocol.hpp"

namespace attncheck {

// The work done so far by the processes of process group `group` (a child and whatever it
// started): their CPU time, user and system, every thread and reaped child; and whether any of
// them is runnable or waiting on the disk (busy: not blocked). Read from /proc: with `leader_only`,
// the group's leader's file alone (a plugin host, one process), else every process's (1 ms here).
struct GroupWork {
  double cpu = 0;
  bool busy = false;
};
GroupWork group_work(pid_t group, bool leader_only = false);

// One process's line of /proc (its stat file): its state, parent, group and CPU time (its own and
// its reaped children's). False when it is gone or the line is not one.
struct ProcessStat {
  char state = 0;
  pid_t parent = 0, group = 0;
  double cpu = 0;
};
bool process_stat(const char* pid, ProcessStat& stat);

// The limits of one call, each in seconds.
struct CallLimits {
  double cpu;      // of CPU time
  double blocked;  // of wall time with no CPU time used and nothing runnable
  double wall;     // of wall time whatever the work: a last resort (a child stuck in the disk)
  bool learnt;     // from calls so far: a hang past it is run again, with to_confirm's limits
};

// One call, watched from when its problem is sent. /proc is first read 0.1 s into the call (the
// first judge()): most calls are over by then, and their CPU time is taken to be their wall time.
class CallWatch {
 public:
  enum Verdict { going, too_much_cpu, blocked };
  CallWatch(pid_t group, bool leader_only, const CallLimits& limits);
  // Reads the group's work: whether the call is over its limits now (ask every 0.1 s).
  Verdict judge();
  // The call is over: its CPU time read once more when it was judged (else /proc is not read).
  void finish();
  // The call's CPU time, at the last judge(); a call never judged, its wall time so far.
  double cpu_used() const;
  Verdict verdict() const { return verdict_; }
  // What the verdict means, for a hang's report: "no answer within 1 s of CPU time", ...
  std::string why() const;

 private:
  pid_t group_;
  bool leader_only_;
  CallLimits limits_;
  double started_at_, progress_at_;  // the steady clock: when sent, and when it last worked
  // The group's CPU time at the first judge(), less the wall time to it (the most the call can
  // have used by then, one thread), and at the last.
  bool judged_ = false;
  double cpu_at_start_ = 0, last_cpu_ = 0;
  Verdict verdict_ = going;
};

// The limits calls get: for each kind of call (its format, the forward, lse, dropout, the
// backward or the layer), the CPU time the slowest answered call of each size took.
class Patience {
 public:
  // `ceiling`: --case-timeout's seconds; `learn`: limits from calls so far (not given), else the
  // ceiling for every call; `command`: a child that may build a session or compile per shape.
  Patience(double ceiling, bool learn, bool command) : ceiling_(ceiling), learn_(learn), command_(command) {}
  void learn(bool learn) { learn_ = learn; }
  CallLimits for_call(const protocol::Request& request) const;
  // The limits of the second run of a call that hung past learnt limits: far more patience.
  CallLimits to_confirm(const CallLimits& first) const;
  void record(const protocol::Request& request, double cpu_seconds);
  // A new child: the first call of each kind may load or compile again, and gets the ceiling.
  void new_child() { called_.clear(); }

 private:
  double ceiling_;
  bool learn_, command_;
  std::map<std::pair<uint64_t, int64_t>, double> slowest_;  // (kind, work): CPU seconds
  std::set<uint64_t> called_;                               // kinds called since the child started
};

}  // namespace attncheck
