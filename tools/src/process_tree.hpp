// The checker's children and what they started: their groups killed when the checker is stopped,
// and a process's descendants found and ended, those that left its group too.
#pragma once

#include <sys/types.h>

namespace attncheck {

// Records that the child `child` (the leader of its own process group) is alive, or no longer, so
// that a checker stopped by Ctrl-C (or SIGTERM, SIGHUP) kills its group first.
void track(pid_t child, bool alive);

// `root`'s descendants (and `root` when `with_root`) ended. Each is stopped first, scan after scan
// until a scan finds nobody new: a stopped process cannot fork, so a child forked while /proc was
// read is found by the next scan. Killed after one scan, such a child could setsid and escape.
void end_tree(pid_t root, bool with_root);

}  // namespace attncheck
