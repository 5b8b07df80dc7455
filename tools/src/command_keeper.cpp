#include "command_keeper.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

#include "process_tree.hpp"

namespace attncheck {
namespace {

// The keeper told of the checker's death: the flag ends its wait, and it ends what the command
// started there.
volatile sig_atomic_t g_checker_gone = 0;
void on_checker_death(int) { g_checker_gone = 1; }

}  // namespace

int stderr_file() {
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/attncheck-stderr-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) throw std::runtime_error("cannot create a file for the command's stderr in " + path.substr(0, path.rfind('/')));
  unlink(path.c_str());
  fcntl(fd, F_SETFL, O_APPEND);  // after the checker truncates it, the child writes from the start again
  return fd;
}

[[noreturn]] void keep_command(const std::string& command, int requests, int answers, int stderr_fd) {
  struct sigaction told {};
  told.sa_handler = on_checker_death;  // without SA_RESTART: the wait below returns
  sigaction(SIGTERM, &told, nullptr);
  prctl(PR_SET_CHILD_SUBREAPER, 1);  // what the command orphans stays the keeper's, for stop() to find
  prctl(PR_SET_PDEATHSIG, SIGTERM);  // in place of start()'s SIGKILL, which covered the moment before
  const pid_t run = fork();
  if (run < 0) _exit(126);
  if (run == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // the keeper killed: so is the command
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);  // the checker's own choice, not the command's
    // The protocol on its stdin and stdout, its stderr kept for the findings.
    dup2(requests, 0);
    dup2(answers, 1);
    dup2(stderr_fd, 2);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close_range(0, ~0u, 0);  // holds no pipe end: the checker sees the command's end of the protocol alone
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  int status = 0;
  while (waitpid(run, &status, 0) < 0 && errno == EINTR && !g_checker_gone) {}
  end_tree(getpid(), false);  // the command is over, or the checker: so is what it started
  if (g_checker_gone) _exit(137);
  if (WIFSIGNALED(status)) {
    signal(WTERMSIG(status), SIG_DFL);
    raise(WTERMSIG(status));
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 126);
}

}  // namespace attncheck
