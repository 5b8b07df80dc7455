// A command's side of the isolation (`--impl-cmd`): the keeper of its process group, and the file
// its stderr goes to.
#pragma once

#include <string>

namespace attncheck {

// A child process's stderr: a file of its own (unlinked), read back after each call.
int stderr_file();

// The keeper of a command's process group: the checker's child, which runs the command as its own
// child and ends as it ends (the same exit status, or the same signal). When the checker dies,
// killed even by SIGKILL, the keeper is told (PR_SET_PDEATHSIG) and ends what the command started,
// which would otherwise outlive the checker. The command runs under /bin/sh with `requests` as its
// stdin, `answers` as its stdout and `stderr_fd` as its stderr.
[[noreturn]] void keep_command(const std::string& command, int requests, int answers, int stderr_fd);

}  // namespace attncheck
