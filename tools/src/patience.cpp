#include "attncheck/patience.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace attncheck {

using protocol::deadline_after;

bool process_stat(const char* pid, ProcessStat& stat) {
  static const double tick = double(sysconf(_SC_CLK_TCK));
  char path[300], text[1024];
  std::snprintf(path, sizeof path, "/proc/%s/stat", pid);
  FILE* file = std::fopen(path, "r");
  if (!file) return false;  // gone since the listing
  const size_t n = std::fread(text, 1, sizeof text - 1, file);
  std::fclose(file);
  text[n] = '\0';
  // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
  // cutime cstime ...: the command name may hold spaces and parentheses, so fields count from its last ')'.
  const char* after = std::strrchr(text, ')');
  int parent = 0, group = 0;
  unsigned long long utime = 0, stime = 0;
  long long cutime = 0, cstime = 0;
  if (!after || std::sscanf(after + 1, " %c %d %d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", &stat.state, &parent,
                            &group, &utime, &stime, &cutime, &cstime) != 7)
    return false;
  stat.parent = parent;
  stat.group = group;
  stat.cpu = double(utime + stime + (unsigned long long)std::max(0LL, cutime + cstime)) / tick;
  return true;
}

namespace {
// Adds process `pid`'s work to `work` when it belongs to process group `group`.
void add_work(const char* pid, pid_t group, GroupWork& work) {
  ProcessStat stat;
  if (!process_stat(pid, stat) || stat.group != group) return;
  work.cpu += stat.cpu;
  work.busy = work.busy || stat.state == 'R' || stat.state == 'D';
}
}  // namespace

GroupWork group_work(pid_t group, bool leader_only) {
  GroupWork work;
  if (leader_only) {
    add_work(std::to_string(group).c_str(), group, work);
    return work;
  }
  DIR* proc = opendir("/proc");
  if (!proc) return work;
  while (const dirent* entry = readdir(proc))
    if (entry->d_name[0] >= '1' && entry->d_name[0] <= '9') add_work(entry->d_name, group, work);
  closedir(proc);
  return work;
}

CallWatch::CallWatch(pid_t group, bool leader_only, const CallLimits& limits)
    : group_(group), leader_only_(leader_only), limits_(limits), started_at_(deadline_after(0)), progress_at_(started_at_) {}

void CallWatch::finish() {
  if (judged_) judge();
}

double CallWatch::cpu_used() const { return judged_ ? last_cpu_ - cpu_at_start_ : deadline_after(0) - started_at_; }

CallWatch::Verdict CallWatch::judge() {
  const GroupWork work = group_work(group_, leader_only_);
  const double now = deadline_after(0);
  if (!judged_) last_cpu_ = cpu_at_start_ = work.cpu - (now - started_at_);
  judged_ = true;
  // A tick of CPU time, or a process runnable or in the disk, is progress (a loaded machine's
  // queue holds a runnable child back without blocking it).
  if (work.cpu > last_cpu_ || work.busy) progress_at_ = now;
  last_cpu_ = std::max(last_cpu_, work.cpu);
  if (cpu_used() > limits_.cpu)
    verdict_ = too_much_cpu;
  else if (now - progress_at_ > limits_.blocked)
    verdict_ = blocked;
  return verdict_;
}

std::string CallWatch::why() const {
  char text[160];
  if (verdict_ == too_much_cpu)
    std::snprintf(text, sizeof text, "no answer within %.3g s of CPU time", limits_.cpu);
  else if (verdict_ == blocked)
    std::snprintf(text, sizeof text, "no answer, and no CPU time used for %.3g s (blocked)", limits_.blocked);
  else
    std::snprintf(text, sizeof text, "no answer within %.3g s", limits_.wall);
  return text;
}

namespace {
// The floors of learnt limits, in CPU seconds: a plugin's call costs what its work does; a command's
// may also build a session or compile for each new shape (ONNX Runtime, JAX).
constexpr double kPluginFloor = 1, kCommandFloor = 10;
// A correct kernel computing is always runnable; blocked this long, it waits on something that
// will not come. A command may wait on its imports' files (a cold disk).
constexpr double kPluginBlocked = 3, kCommandBlocked = 10;
// The wall clock's last resort, in ceilings: only a child neither working nor blocked (stuck in
// the disk) meets it.
constexpr double kWallCeilings = 10;
// The second run of a call that hung past learnt limits: this many times the patience (itself ten
// times the slowest such call's), at least kConfirmBlocked seconds blocked, within the ceiling. A
// stall does not come back in a new child; a hang does, and is reported within 20 s on a loaded
// machine (docs/checking.md).
constexpr double kConfirm = 2, kConfirmBlocked = 6;

// A kind of call: its dtype, and whether it is the backward, the layer or asks the lse, dropout or
// the layer's weights (other code, which a JIT may compile on its first call).
uint64_t call_kind(const protocol::ProblemHeader& r) {
  using namespace protocol;
  constexpr uint32_t direction = protocol_flag(ATTNCHECK_CAP_LSE) | kBackward | kDropout | kWantKeep | kLayer | kWantWeights;
  return uint64_t(uint32_t(r.dtype)) << 32 | (r.flags & direction);
}
// Its work: the scores and their use, and a layer's four projections of width D.
int64_t call_work(const protocol::Request& request) {
  const protocol::ProblemHeader& r = request.header;
  const int64_t attention = int64_t(r.B) * r.H * r.Tq * r.Tk * (int64_t(r.dk) + r.dv);
  if (!(r.flags & protocol::kLayer)) return attention;
  const int64_t heads_q = int64_t(r.H) * r.Tq * (int64_t(r.dk) + r.dv),
                heads_kv = int64_t(r.H_kv) * r.Tk * (int64_t(r.dk) + r.dv);
  return attention + int64_t(r.B) * request.layer.D * (heads_q + heads_kv);
}
}  // namespace

CallLimits Patience::for_call(const protocol::Request& request) const {
  const uint64_t kind = call_kind(request.header);
  const CallLimits at_ceiling{ceiling_, ceiling_, kWallCeilings * ceiling_, false};
  if (!learn_ || !called_.count(kind)) return at_ceiling;
  // The slowest call at least as large; none: the largest smaller one's time times the square of
  // the work's ratio (a generous guess: a cost may grow faster than the work, not that fast).
  const int64_t work = call_work(request);
  auto at = slowest_.lower_bound({kind, work});
  double expected = 0;
  for (auto larger = at; larger != slowest_.end() && larger->first.first == kind; ++larger)
    expected = std::max(expected, larger->second);
  if ((at == slowest_.end() || at->first.first != kind) && at != slowest_.begin() && (--at)->first.first == kind) {
    const double ratio = double(work) / double(std::max<int64_t>(at->first.second, 1));
    expected = at->second * ratio * ratio;
  }
  const double cpu = std::clamp(10 * expected, std::min(command_ ? kCommandFloor : kPluginFloor, ceiling_), ceiling_);
  return {cpu, std::min(std::max(cpu, command_ ? kCommandBlocked : kPluginBlocked), ceiling_), at_ceiling.wall, cpu < ceiling_};
}

CallLimits Patience::to_confirm(const CallLimits& first) const {
  return {std::min(kConfirm * first.cpu, ceiling_), std::min(std::max(kConfirm * first.blocked, kConfirmBlocked), ceiling_),
          first.wall, false};
}

void Patience::record(const protocol::Request& request, double cpu_seconds) {
  double& slowest = slowest_[{call_kind(request.header), call_work(request)}];
  slowest = std::max(slowest, cpu_seconds);
  called_.insert(call_kind(request.header));
}

}  // namespace attncheck
