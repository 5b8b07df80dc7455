#include "process_tree.hpp"

#include <dirent.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "attncheck/patience.hpp"

namespace attncheck {
namespace {

// The process groups of the children alive now, for the signal handler below.
std::atomic<pid_t> g_children[16];

// A checker stopped by Ctrl-C (or SIGTERM, SIGHUP) kills its children's groups first: a command's
// shell passes its death on (PR_SET_PDEATHSIG) but not to the command it started, which would go
// on running, stuck in a loop perhaps, in a group the terminal's signal does not reach.
void on_stop(int signal) {
  for (std::atomic<pid_t>& child : g_children)
    if (const pid_t group = child.load(); group > 0) kill(-group, SIGKILL);
  ::signal(signal, SIG_DFL);
  raise(signal);
}

// Every process descended from `root`, by parent pids read from /proc: what a command started that
// left its process group (setsid), which killing the group does not reach. The keeper is a
// subreaper, so an orphan of the command is still the keeper's descendant.
std::vector<pid_t> descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // parent, child
  if (DIR* proc = opendir("/proc")) {
    ProcessStat stat;
    while (const dirent* entry = readdir(proc))
      if (entry->d_name[0] >= '1' && entry->d_name[0] <= '9' && process_stat(entry->d_name, stat))
        children.emplace(stat.parent, pid_t(std::atoi(entry->d_name)));
    closedir(proc);
  }
  std::vector<pid_t> found;
  for (std::vector<pid_t> next{root}; !next.empty();) {
    const pid_t parent = next.back();
    next.pop_back();
    for (auto [at, end] = children.equal_range(parent); at != end; ++at) {
      found.push_back(at->second);
      next.push_back(at->second);
    }
  }
  return found;
}

}  // namespace

void track(pid_t child, bool alive) {
  static const bool installed = [] {
    for (int stop : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction now {};
      sigaction(stop, nullptr, &now);
      if (now.sa_handler == SIG_DFL) ::signal(stop, on_stop);  // a program's own handler stays
    }
    return true;
  }();
  (void)installed;
  for (std::atomic<pid_t>& slot : g_children) {
    pid_t expected = alive ? 0 : child;
    if (slot.compare_exchange_strong(expected, alive ? child : 0)) return;
  }
}

void end_tree(pid_t root, bool with_root) {
  std::set<pid_t> stopped;
  if (with_root && kill(root, SIGSTOP) == 0) stopped.insert(root);
  for (bool more = true; more;) {
    more = false;
    for (const pid_t found : descendants(root))
      if (stopped.insert(found).second) {
        kill(found, SIGSTOP);
        more = true;
      }
  }
  for (const pid_t left : stopped) kill(left, SIGKILL);
}

}  // namespace attncheck
