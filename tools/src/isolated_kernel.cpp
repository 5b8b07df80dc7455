#include "attncheck/isolated_kernel.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "attncheck/printable.hpp"
#include "attncheck/protocol.hpp"
#include "command_keeper.hpp"
#include "plugin_host.hpp"
#include "process_tree.hpp"

namespace attncheck {
namespace {

using namespace protocol;
constexpr size_t kLongestFail = 1 << 16;  // a FAIL's text; longer is a broken protocol, not an allocation
constexpr size_t kShownFail = 400;        // of it, on one line
constexpr size_t kShownStderr = 8192;     // of a command's stderr after a call, its last bytes
constexpr double kCommandStart = 120;     // seconds a command's start (its HELO) may take under the adaptive timeout

std::string signal_name(int signal) {
  const char* name = sigabbrev_np(signal);
  return name ? std::string("SIG") + name : "signal " + std::to_string(signal);
}

// Where a fault lay, as a finding says it ("" when the signal gave no address).
std::string fault_place(const Fault& f) {
  constexpr int64_t kNear = int64_t(64) << 20;  // farther past a buffer than this is not that buffer's overrun
  const bool named = f.buffer >= 0 && f.buffer < kBuffers && f.distance >= 0;
  const std::string name = named ? kSlots[size_t(f.buffer)].name : "",
                    bytes = std::to_string(f.distance) + (f.distance == 1 ? " byte " : " bytes ");
  char address[40];
  std::snprintf(address, sizeof address, "0x%llx", static_cast<unsigned long long>(f.address));
  if (named && f.where == Fault::before) return "it touched the guard before the start of " + name + " (" + bytes + "before it)";
  if (named && f.where == Fault::past) return "it touched the guard past the end of " + name + " (" + bytes + "past it)";
  if (named && f.where == Fault::read_only) return "it wrote into the read-only input " + name;
  if (named && f.where == Fault::outside && f.distance <= kNear)
    return "it touched memory outside every buffer, " + bytes + "past the end of " + name;
  if (f.where == Fault::outside && f.address < 65536)
    return std::string("it dereferenced a null pointer (address ") + address + ")";
  if (f.where == Fault::outside) return std::string("it touched memory outside every buffer, at ") + address;
  return "";
}

}  // namespace

IsolatedKernel::IsolatedKernel(std::string which, double case_timeout_seconds, bool command)
    : which_(std::move(which)),
      timeout_(case_timeout_seconds),
      patience_(case_timeout_seconds, false, command),
      command_(command) {}

IsolatedKernel::~IsolatedKernel() {
  stop();
  if (stderr_fd_ >= 0) close(stderr_fd_);
}

void IsolatedKernel::stop() {
  if (child_ > 0) {
    end_tree(child_, true);  // what left the group too
    kill(-child_, SIGKILL);  // its process group: a command's shell and whatever it started
    waitpid(child_, nullptr, 0);
    track(child_, false);
  }
  if (to_child_ >= 0) close(to_child_);
  if (from_child_ >= 0) close(from_child_);
  child_ = -1;
  to_child_ = from_child_ = -1;
}

std::string IsolatedKernel::take_stderr() {
  if (stderr_fd_ < 0) return "";
  struct stat info {};
  fstat(stderr_fd_, &info);
  const size_t size = size_t(info.st_size), kept = std::min<size_t>(size, kShownStderr);
  std::string text(kept, '\0');
  const ssize_t got = pread(stderr_fd_, text.data(), kept, off_t(size - kept));
  text.resize(got > 0 ? size_t(got) : 0);
  if (kept < size) {  // from the first whole line kept
    const size_t cut = text.find('\n') == std::string::npos ? 0 : text.find('\n') + 1;
    text = "[... " + std::to_string(size - kept + cut) + " bytes before]\n" + text.substr(cut);
  }
  text = printable(text, text.size(), true);  // its escape sequences never reach the terminal
  if (ftruncate(stderr_fd_, 0) != 0) text += "\n[cannot truncate the stderr file]";
  return text;
}

// One frame from the child as receive reads it: its header, read, and the steps that read the rest
// of it and say what it means.
struct IsolatedKernel::Frame {
  IsolatedKernel& kernel;
  const char* during;
  const Deadline& deadline;
  FrameHeader header;

  std::string name() const { return std::string(header.tag.name, 4); }
  // The end of the call when the child closes its output (its fate) or stops answering (a hang).
  Outcome lost(Io io) { return io == Io::closed ? kernel.fate(during) : kernel.hung(during); }
  // A payload whose length this frame cannot have is a broken protocol; nothing is allocated for it.
  // The bytes shown are those received: the header, what of the payload was read (`taken`, n bytes:
  // a RSLT's status), then what follows.
  Outcome broken(const std::string& why, const void* taken = nullptr, size_t n = 0) {
    uint8_t more[56];
    size_t got = 0;
    pollfd ready{kernel.from_child_, POLLIN, 0};
    if (poll(&ready, 1, 50) > 0) {
      const ssize_t r = read(kernel.from_child_, more, sizeof more);
      got = r > 0 ? size_t(r) : 0;
    }
    std::string bytes(reinterpret_cast<const char*>(&header), sizeof header);
    bytes.append(static_cast<const char*>(taken), n);
    bytes.append(reinterpret_cast<const char*>(more), got);
    kernel.stop();
    return Outcome{Outcome::broke_protocol, 0,
                   "broke the protocol (docs/protocol.md) while " + std::string(during) + ": " + why + "; it sent " +
                       show_bytes(bytes.data(), bytes.size())};
  }
  std::optional<Outcome> payload(void* into_bytes, size_t n) {
    if (header.length != n) return broken("a " + name() + " frame of " + std::to_string(n) + " bytes");
    if (const Io io = read_all(kernel.from_child_, into_bytes, n, deadline); io != Io::ok) return lost(io);
    return std::nullopt;
  }

  std::optional<Outcome> on_mode(bool starting, const char* entry_point) {
    uint64_t control;
    if (auto end = payload(&control, sizeof control)) return end;
    const FpMode mode{control};
    if (!kernel.have_mode_)
      kernel.have_mode_ = true;
    else if (kernel.fp_mode_finding_.empty())
      kernel.fp_mode_finding_ =
          starting ? fp_mode_finding_at_load(kernel.mode_, mode) : fp_mode_finding_in_call(entry_point, kernel.mode_, mode);
    kernel.mode_ = mode;
    return std::nullopt;
  }

  // A FAIL, or during a call a NTKN.
  Outcome on_failure(bool starting) {
    if (header.length > kLongestFail) return broken("a " + name() + " frame of at most 65536 bytes");
    std::string text(header.length, '\0');
    if (auto end = payload(text.data(), text.size())) return *end;
    text = printable(text, kShownFail);
    if (header.tag == kNotTaken) return Outcome{Outcome::not_taken, 0, text};
    if (starting) {
      kernel.stop();
      return Outcome{Outcome::refused, 0, text};
    }
    return Outcome{Outcome::raised, 0, "raised " + text};
  }

  Outcome on_hello(Hello& hello) {
    if (!(header.tag == kHello)) return broken(kernel.command_ ? "expected HELO (or FAIL)" : "expected HELO (or FAIL, MODE)");
    // 12 bytes, or 108 with the domain (a HELO from before restrictions takes every problem).
    hello = Hello{};
    if (header.length != kHelloWithoutDomain && header.length != sizeof hello)
      return broken("a HELO frame of 12 or " + std::to_string(sizeof hello) + " bytes");
    if (auto end = payload(&hello, header.length)) return *end;
    if (hello.protocol != kVersion)
      return broken("it speaks protocol version " + std::to_string(hello.protocol) + ", this checker " +
                    std::to_string(kVersion));
    if (hello.abi != 1 && hello.abi != 2) return broken("its HELO names ABI " + std::to_string(hello.abi) + ", not 1 or 2");
    const Domain domain{hello.restrictions, limits_from_abi(hello.limits)};
    if (const std::string why = domain_error(domain, hello.capabilities); !why.empty()) return broken("its HELO declares " + why);
    return Outcome{};
  }

  std::optional<Outcome> on_stray() {
    int32_t stray[2];
    if (auto end = payload(stray, sizeof stray)) return end;
    if (stray[0] >= 0 && stray[0] < kBuffers) kernel.stray_ = {stray[0], stray[1]};
    return std::nullopt;
  }

  Outcome on_fault() {
    Fault fault;
    if (auto end = payload(&fault, sizeof fault)) return *end;
    Outcome dead = kernel.fate(during);
    if (const std::string where = fault_place(fault); !where.empty())
      dead.detail = "crashed with " + signal_name(fault.signal) + ": " + where;
    return dead;
  }

  Outcome on_result(const Request& headers, void* const (&into)[kBuffers]) {
    const ProblemHeader& r = headers.header;
    if (!(header.tag == kResult))
      return broken("expected RSLT (or FAIL" + std::string(kernel.command_ ? ")" : ", MODE, STRY, FALT)"));
    int32_t status;
    if (header.length != sizeof status && header.length != result_payload(headers))
      return broken("a RSLT frame of 4 bytes (a refusal) or " + std::to_string(result_payload(headers)) + " (the status and " +
                    (r.flags & kLayer      ? (r.flags & kWantWeights ? "out, weights)" : "out)")
                     : r.flags & kBackward ? "dq, dk, dv)"
                     : r.flags & kWantKeep ? (r.flags & kWantLse ? "out, keep, lse)" : "out, keep)")
                     : r.flags & kWantLse  ? "out, lse)"
                                           : "out)"));
    if (const Io io = read_all(kernel.from_child_, &status, sizeof status, deadline); io != Io::ok) return lost(io);
    if (status != 0 && header.length != sizeof status)
      return broken("a refusal's RSLT carries the status alone", &status, sizeof status);
    if (status == 0 && header.length == sizeof status)
      return broken("a RSLT with status 0 carries the outputs", &status, sizeof status);
    size_t sizes[kBuffers];
    buffer_sizes(headers, sizes);
    for (int b = 0; b < kBuffers && status == 0; ++b)
      if (written(headers, b))
        if (const Io io = read_all(kernel.from_child_, into[b], sizes[b], deadline); io != Io::ok) return lost(io);
    if (kernel.stray_.first >= 0)
      return Outcome{Outcome::stray_write, 0,
                     std::string("wrote outside its output: ") +
                         (kernel.stray_.second == 0 ? "before the start of " : "past the end of ") +
                         kSlots[size_t(kernel.stray_.first)].name + " (canary bytes changed)"};
    if (status != 0)
      return Outcome{Outcome::refused, status, "refused a valid problem (returned " + std::to_string(status) + ")"};
    return Outcome{};
  }
};

// What a frame from the child means during a call or a start-up: how the call ended, or nothing yet.
std::optional<Outcome> IsolatedKernel::receive(const char* during, const Deadline& deadline, const void* request,
                                               void* const (&into)[kBuffers], const char* entry_point, Hello* hello) {
  Frame frame{*this, during, deadline, {}};
  if (const Io io = read_all(from_child_, &frame.header, sizeof frame.header, deadline); io != Io::ok) return frame.lost(io);
  const Tag tag = frame.header.tag;
  // The plugin host's own frames: a command that sends one forges what only the host can see.
  if (command_ && (tag == kMode || tag == kStray || tag == kFault))
    return frame.broken("a " + frame.name() + " frame, which only attncheck's plugin host sends");
  if (tag == kMode) return frame.on_mode(hello != nullptr, entry_point);
  if (tag == kFail || (tag == kNotTaken && !hello)) return frame.on_failure(hello != nullptr);
  if (hello) return frame.on_hello(*hello);
  if (tag == kStray) return frame.on_stray();
  if (tag == kFault) return frame.on_fault();
  return frame.on_result(*static_cast<const Request*>(request), into);
}

void IsolatedKernel::start() {
  stop();
  signal(SIGPIPE, SIG_IGN);  // a dead child must give an error on write, not kill the checker
  if (command_ && stderr_fd_ < 0) stderr_fd_ = stderr_file();
  int requests[2], answers[2];
  if (pipe2(requests, O_CLOEXEC) != 0 || pipe2(answers, O_CLOEXEC) != 0)
    throw std::runtime_error("cannot create pipes for the child");
  std::fflush(nullptr);  // else a plugin's exit() would flush the child's copy of our buffered output
  const pid_t checker = getpid();
  child_ = fork();
  if (child_ < 0) throw std::runtime_error("cannot fork the child that runs the implementation");
  if (child_ == 0) {
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);  // the checker's handlers (a stop it asks of itself) are not the child's
    signal(SIGTERM, SIG_DFL);
    // A checker stopped by Ctrl-C or killed takes its child along, even one stuck in a loop (in a
    // group of its own, the terminal's signal does not reach it).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != checker) _exit(0);
    if (!command_) host_plugin(which_, requests[0], answers[1]);
    keep_command(which_, requests[0], answers[1], stderr_fd_);
  }
  setpgid(child_, child_);  // also here: stop() may come before the child has run
  track(child_, true);
  close(requests[0]);
  close(answers[1]);
  to_child_ = requests[1];
  fcntl(to_child_, F_SETFL, O_NONBLOCK);  // writes are bounded by the case's deadline (exchange)
  from_child_ = answers[0];
  have_mode_ = false;
  patience_.new_child();
  // A command's start-up (its imports) gets kCommandStart unless --case-timeout fixes the timeout:
  // importing torch 1.13 from a cold disk took 18 s here, and over 30 s beside a build. A start is
  // judged by the wall clock: a cold disk's reads use no CPU time.
  start_timeout_ = command_ && adaptive_ ? std::max(timeout_, kCommandStart) : timeout_;
  watch_.reset();
  Hello hello{};
  void* const none[kBuffers] = {};
  const Deadline deadline = deadline_after(start_timeout_);
  cut_by_budget_ = false;
  std::optional<Outcome> started;
  while (!(started = receive(command_ ? "starting" : "loading the plugin", deadline, nullptr, none, "", &hello))) {}
  if (started->kind != Outcome::ok) {  // a plugin's FAIL is the loader's reason, which names the file
    const std::string err = take_stderr();
    throw std::runtime_error((command_                            ? "the command '" + which_ + "': "
                              : started->kind == Outcome::refused ? ""
                                                                  : which_ + ": ") +
                             started->detail + (err.empty() ? "" : "\nits stderr:\n" + err));
  }
  if (command_) {
    said_at_start_ = take_stderr();
    while (!said_at_start_.empty() && said_at_start_.back() == '\n') said_at_start_.pop_back();
  }
  version_ = int32_t(hello.abi);
  capabilities_ = hello.capabilities;
  domain_ = {hello.restrictions, limits_from_abi(hello.limits)};
}

Outcome IsolatedKernel::budget_ended(const char* during) {
  return Outcome{Outcome::out_of_budget, 0,
                 std::string("stopped while ") + during + ": " +
                     (stop_requested() ? "the run was interrupted" : "the run's budget (--seconds) ended")};
}

bool IsolatedKernel::told_to_stop() const { return stop_requested() || (stop_when_ && stop_when_()); }
bool IsolatedKernel::past_budget() const { return told_to_stop() || deadline_after(0) >= budget_end_; }

Outcome IsolatedKernel::hung(const char* during) {
  stop();
  const bool judged = watch_ && watch_->verdict() != CallWatch::going;
  // The run's time ran out first, or a signal stopped it: no verdict on the call.
  if (told_to_stop() || (cut_by_budget_ && !judged)) return budget_ended(during);
  char start[80];
  std::snprintf(start, sizeof start, "no answer within %.3g s", start_timeout_);
  return Outcome{Outcome::hung, 0,
                 "hung: " + (watch_ ? watch_->why() : std::string(start)) + " while " + during + " (the child was killed)"};
}

Outcome IsolatedKernel::fate(const char* waiting_for) {
  int status = 0;
  Outcome outcome{Outcome::exited, 0, std::string("closed its output while ") + waiting_for};
  if (child_ > 0) {
    // A command that closed its stdout may still be running: give it a moment, then stop it.
    pid_t done = 0;
    for (int tries = 0; tries < 100 && (done = waitpid(child_, &status, WNOHANG)) == 0; ++tries) usleep(10000);
    if (done == child_) {
      // A shell reports its command's death by a signal as the exit status 128 + the signal.
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
      const int signal = WIFSIGNALED(status) ? WTERMSIG(status) : command_ && code > 128 && code < 160 ? code - 128 : 0;
      if (signal)
        outcome = {Outcome::crashed, signal, "crashed with " + signal_name(signal) + " while " + waiting_for};
      else
        outcome = {Outcome::exited, code, "exited with status " + std::to_string(code) + " while " + waiting_for};
    }
  }
  stop();  // the group too: what the shell started may outlive it
  return outcome;
}

Outcome IsolatedKernel::exchange(const Request& headers, const void* const (&buffers)[kBuffers], void* const (&into)[kBuffers],
                                 const char* entry_point) {
  if (past_budget()) return budget_ended("waiting to be sent");
  const CallLimits limits = patience_.for_call(headers);
  Outcome outcome = exchange_once(headers, buffers, into, entry_point, limits);
  if (outcome.kind != Outcome::hung || !limits.learnt) return outcome;
  // A hang past limits learnt from calls so far may be a stall (a page-fault storm, a thread pool
  // spinning on a loaded machine): the call runs again in a new child, with twice the patience
  // (Patience::to_confirm), before it counts.
  if (past_budget()) return budget_ended("waiting to run again a call that passed its limit");
  const std::string first = outcome.detail.substr(0, outcome.detail.rfind(" (the child was killed)"));
  start();
  outcome = exchange_once(headers, buffers, into, entry_point, patience_.to_confirm(limits));
  if (outcome.kind == Outcome::hung)
    outcome.detail = first + ", and run again in a new child, " + watch_->why() +
                     " (the child was killed; the first limit adapts: 10 times the CPU time calls of its kind as large "
                     "took; --case-timeout S fixes it)";
  return outcome;
}

Outcome IsolatedKernel::exchange_once(const Request& headers, const void* const (&buffers)[kBuffers],
                                      void* const (&into)[kBuffers], const char* entry_point, const CallLimits& limits) {
  size_t sizes[kBuffers];
  buffer_sizes(headers, sizes);
  // One deadline for the whole exchange: a child that stops reading its problem hangs as surely as
  // one that never answers (to_child_ is non-blocking, so a full pipe cannot block the checker).
  watch_.emplace(child_, !command_, limits);  // a plugin host is one process; a command, its whole group
  const Deadline deadline{std::min(deadline_after(limits.wall), budget_end_),
                          [this] { return told_to_stop() || watch_->judge() != CallWatch::going; }};
  cut_by_budget_ = deadline.at == budget_end_;
  const FrameHeader frame{kProblem, uint32_t(problem_payload(headers))};
  Io sent = write_all(to_child_, &frame, sizeof frame, deadline);
  for_each_header(headers, [&](const char* header, size_t size) {
    if (sent == Io::ok) sent = write_all(to_child_, header, size, deadline);
  });
  for (int b = 0; b < kBuffers && sent == Io::ok; ++b)
    if (!written(headers, b) && sizes[b] > 0) sent = write_all(to_child_, buffers[b], sizes[b], deadline);
  if (sent == Io::closed) return fate("reading its problem");
  if (sent == Io::timed_out) return hung("reading its problem");
  stray_ = {-1, -1};
  std::optional<Outcome> outcome;
  while (!(outcome = receive("computing", deadline, &headers, into, entry_point, nullptr))) {}
  if (outcome->kind != Outcome::hung) {
    watch_->finish();
    patience_.record(headers, watch_->cpu_used());
  }
  return *outcome;
}

}  // namespace attncheck
