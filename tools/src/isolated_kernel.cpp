#include "attncheck/isolated_kernel.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "attncheck/abi.hpp"
#include "attncheck/features.hpp"
#include "attncheck/fp_mode.hpp"
#include "attncheck/patience.hpp"
#include "attncheck/plugin_loader.hpp"
#include "attncheck/printable.hpp"
#include "attncheck/protocol.hpp"

namespace attncheck {
namespace {

using namespace protocol;
constexpr uint8_t kCanary = 0xA5;
constexpr size_t kLongestFail = 1 << 16;  // a FAIL's text; longer is a broken protocol, not an allocation
constexpr size_t kShownFail = 400;        // of it, on one line
constexpr size_t kShownStderr = 8192;     // of a command's stderr after a call, its last bytes
constexpr double kCommandStart = 120;     // seconds a command's start (its HELO) may take under the adaptive timeout

// ---- The plugin host: the child that loads a plugin and speaks the protocol ----

// n bytes between two guard regions (PROT_NONE, kGuard bytes each), 64-byte aligned and flush with
// the trailing guard (or, at_start, with the leading one), canary bytes in the slack of its pages.
// Calls alternate the two placements, so that reads past either end meet a guard in one call or the
// other. A guard is wide enough that an overrun by a stride lands in the buffer's own guard, so a
// fault there is the buffer's. An absent buffer (n 0) is not mapped: no fault can name it.
constexpr size_t kGuard = size_t(1) << 20;
struct Guarded {
  uint8_t *base = nullptr, *pages = nullptr, *data = nullptr;
  size_t data_pages_bytes = 0, n = 0;
  Guarded(size_t bytes, bool at_start) : n(bytes) {
    if (n == 0) return;
    const size_t page = size_t(sysconf(_SC_PAGESIZE)), rounded = (n + 63) / 64 * 64;
    data_pages_bytes = (rounded + page - 1) / page * page;
    void* mem = mmap(nullptr, data_pages_bytes + 2 * kGuard, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) _exit(70);
    base = static_cast<uint8_t*>(mem);
    pages = base + kGuard;
    if (mprotect(pages, data_pages_bytes, PROT_READ | PROT_WRITE) != 0) _exit(70);
    data = at_start ? pages : pages + data_pages_bytes - rounded;
    std::memset(pages, kCanary, data_pages_bytes);
  }
  ~Guarded() {
    if (base) munmap(base, data_pages_bytes + 2 * kGuard);
  }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
  void read_only() {
    if (n) mprotect(pages, data_pages_bytes, PROT_READ);
  }
  // Which canary slack was written: 0 before the data, 1 after it, -1 none.
  int damaged() const {
    for (const uint8_t* p = pages; p < data; ++p)
      if (*p != kCanary) return 0;
    for (const uint8_t* p = data + n; p < pages + data_pages_bytes; ++p)
      if (*p != kCanary) return 1;
    return -1;
  }
};

// The current call's buffers and which it writes, for the fault handler (set before the call,
// read in a signal).
Guarded* volatile g_buffers[kBuffers];
volatile bool g_written[kBuffers];
int g_answer_fd = -1;

// Where a faulting address lies among the call's buffers (async-signal-safe: arithmetic alone).
Fault locate(int signal, const siginfo_t& info) {
  const auto* address = static_cast<const uint8_t*>(info.si_addr);
  Fault fault{signal, -1, Fault::unknown, 0, 0, uint64_t(uintptr_t(address))};
  if (info.si_code <= 0 || info.si_code == SI_KERNEL) return fault;  // no address: sent, or a general protection fault
  fault.where = Fault::outside;
  for (int b = 0; b < kBuffers; ++b) {
    const Guarded* g = g_buffers[b];
    if (!g || !g->base) continue;
    const uint8_t *start = g->data, *end = g->data + g->n;
    if (address >= g->base && address < g->pages) return {signal, b, Fault::before, 0, int64_t(start - address), fault.address};
    if (address >= g->pages + g->data_pages_bytes && address < g->pages + g->data_pages_bytes + kGuard)
      return {signal, b, Fault::past, 0, int64_t(address - end), fault.address};
    if (address >= g->pages && address < g->pages + g->data_pages_bytes && !g_written[b])
      return {signal, b, Fault::read_only, 0, 0, fault.address};
    if (address >= end && (fault.buffer < 0 || address - end < fault.distance))
      fault.buffer = b, fault.distance = int64_t(address - end);
  }
  return fault;
}

// A FALT frame (where the fault lies), written in one write, then the signal's default action.
void on_fault(int signal, siginfo_t* info, void*) {
  const Fault fault = locate(signal, *info);
  uint8_t frame[sizeof(FrameHeader) + sizeof fault];
  const FrameHeader header{kFault, sizeof fault};
  std::memcpy(frame, &header, sizeof header);
  std::memcpy(frame + sizeof header, &fault, sizeof fault);
  ssize_t ignored = write(g_answer_fd, frame, sizeof frame);
  (void)ignored;
  ::signal(signal, SIG_DFL);
  raise(signal);
}

void send_mode(int fd) {
  const uint64_t control = current_fp_mode().control;
  if (!write_frame(fd, kMode, &control, sizeof control)) _exit(0);
}

// The ABI view of a layer call's buffers (`data` gives each one's pointer, null when absent); x_kv is
// x_q for self-attention. Empty when the call is not a layer's.
template <class Data>
attncheck_mha_v2 layer_of(const Request& request, Data data) {
  const ProblemHeader& r = request.header;
  attncheck_mha_v2 m{};
  if (!(r.flags & kLayer)) return m;
  m.size = int32_t(sizeof m);
  m.dtype = r.dtype;
  m.batch = r.B;
  m.q_len = r.Tq;
  m.kv_len = r.Tk;
  m.d_model = request.layer.D;
  m.heads = r.H;
  m.kv_heads = r.H_kv;
  m.d_k = r.dk;
  m.d_v = r.dv;
  m.x_q = data(X_Q);
  m.x_kv = request.layer.parts & LayerHeader::kSelf ? m.x_q : data(X_KV);
  m.w_q = data(W_Q);
  m.w_k = data(W_K);
  m.w_v = data(W_V);
  m.b_q = data(B_Q);
  m.b_k = data(B_K);
  m.b_v = data(B_V);
  m.w_o = data(W_O);
  m.b_o = data(B_O);
  m.allow = static_cast<const uint8_t*>(data(ALLOW));
  m.kv_lens = static_cast<const int32_t*>(data(KV_LENS));
  m.causal = r.causal;
  m.window_left = r.window_left;
  m.window_right = r.window_right;
  m.scale = r.scale;
  m.out = data(OUT);
  m.weights = static_cast<float*>(data(WEIGHTS));
  return m;
}

[[noreturn]] void host_plugin(const std::string& which, int requests, int answers) {
  g_answer_fd = answers;
  // MODE before and after loading (the mode the library leaves is kept: it is what a program
  // gets), then HELO, or FAIL with the loader's reason.
  send_mode(answers);
  Plugin plugin;
  try {
    plugin = load_plugin(which);
  } catch (const std::exception& e) {
    write_frame(answers, kFail, e.what(), std::strlen(e.what()));
    _exit(0);
  }
  send_mode(answers);
  const Hello hello{kVersion, uint32_t(plugin.version), plugin.capabilities, plugin.domain.restrictions,
                    limits_to_abi(plugin.domain.limits)};
  if (!write_frame(answers, kHello, &hello, sizeof hello)) _exit(0);

  struct sigaction action {};
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &action, nullptr);
  sigaction(SIGBUS, &action, nullptr);

  const double forever = std::numeric_limits<double>::infinity();
  FrameHeader frame;
  for (uint64_t call = 0; read_all(requests, &frame, sizeof frame, forever) == Io::ok; ++call) {
    Request request{};
    ProblemHeader& r = request.header;
    const DropoutHeader& dropout = request.dropout;
    if (!(frame.tag == kProblem) || read_all(requests, &r, sizeof r, forever) != Io::ok) _exit(71);
    if ((r.flags & kDropout) && read_all(requests, &request.dropout, sizeof dropout, forever) != Io::ok) _exit(71);
    if ((r.flags & kLayer) && read_all(requests, &request.layer, sizeof request.layer, forever) != Io::ok) _exit(71);
    size_t sizes[kBuffers];
    buffer_sizes(request, sizes);
    const bool at_start = call % 2 == 1;
    std::optional<Guarded> all[kBuffers];
    for (int b = 0; b < kBuffers; ++b) all[b].emplace(sizes[b], at_start);
    for (int b = 0; b < kBuffers; ++b) {
      if (written(request, b)) continue;
      if (read_all(requests, all[b]->data, sizes[b], forever) != Io::ok) _exit(0);
      all[b]->read_only();
    }
    // Unwritten outputs read as NaN (a keep mask as kUnwrittenKeep).
    for (int b = 0; b < kBuffers; ++b) {
      if (!written(request, b)) continue;
      Guarded& buffer = *all[b];
      if (b == KEEP) {
        std::memset(buffer.data, kUnwrittenKeep, buffer.n);
        continue;
      }
      const bool float_storage = b == LSE || b == WEIGHTS;  // float, or double for f64
      visit_format(float_storage ? (r.dtype == ATTNCHECK_F64 ? Format::f64 : Format::f32) : Format(r.dtype), [&](auto zero) {
        using F = decltype(zero);
        const auto nan = Precision<F>::to_bits(Precision<F>::from_double(std::numeric_limits<double>::quiet_NaN()));
        for (size_t n = 0; n < buffer.n; n += sizeof nan) std::memcpy(buffer.data + n, &nan, sizeof nan);
      });
    }
    auto data = [&](Buffer b) { return sizes[b] ? static_cast<void*>(all[b]->data) : nullptr; };

    // The problem as ABI v2 carries it (for the backward, its out and lse the given ones); a v1
    // plugin gets its v1 view (key lengths folded into allow).
    attncheck_problem_v2 v2{};
    v2.size = int32_t(sizeof v2);
    v2.dtype = r.dtype;
    v2.batch = r.B;
    v2.heads = r.H;
    v2.kv_heads = r.H_kv;
    v2.q_len = r.Tq;
    v2.kv_len = r.Tk;
    v2.d_k = r.dk;
    v2.d_v = r.dv;
    v2.q = data(Q);
    v2.k = data(K);
    v2.v = data(V);
    v2.allow = static_cast<const uint8_t*>(data(ALLOW));
    v2.kv_lens = static_cast<const int32_t*>(data(KV_LENS));
    v2.bias = data(BIAS);
    v2.causal = r.causal;
    v2.window_left = r.window_left;
    v2.window_right = r.window_right;
    v2.scale = r.scale;
    v2.softcap = r.softcap;
    v2.out = data(OUT);
    v2.lse = data(LSE);
    v2.dropout_p = dropout.p;
    v2.dropout_seed = dropout.seed;
    v2.dropout_keep = static_cast<uint8_t*>(data(KEEP));
    auto call_v1 = [&](auto zero) {
      using T = decltype(zero);
      std::vector<uint8_t> folded;
      const attncheck_problem v1 = to_abi(from_abi_v2<T>(v2), static_cast<T*>(v2.out), folded);
      return (r.dtype == ATTNCHECK_F64 ? plugin.forward_f64 : plugin.forward_f32)(&v1);
    };
    const attncheck_grads_v2 grads{&v2, data(DOUT), data(DQ), data(DK), data(DV)};
    const attncheck_mha_v2 layer = layer_of(request, data);
    for (int b = 0; b < kBuffers; ++b) {
      g_buffers[b] = &*all[b];
      g_written[b] = written(request, b);
    }
    const bool backward = r.flags & kBackward;
    const int32_t status = r.flags & kLayer           ? (plugin.mha_v2 ? plugin.mha_v2(&layer) : 4)
                           : backward                 ? (plugin.backward_v2 ? plugin.backward_v2(&grads) : 4)
                           : plugin.version != 1      ? plugin.forward_v2(&v2)
                           : r.dtype == ATTNCHECK_F64 ? call_v1(0.0)
                                                      : call_v1(0.0f);
    for (int b = 0; b < kBuffers; ++b) g_buffers[b] = nullptr;

    // MODE, STRY for the first written buffer whose canaries changed, then RSLT.
    send_mode(answers);
    for (int b = 0; b < kBuffers; ++b)
      if (const int damage = written(request, b) ? all[b]->damaged() : -1; damage >= 0) {
        const int32_t stray[2] = {b, damage};
        if (!write_frame(answers, kStray, stray, sizeof stray)) _exit(0);
        break;
      }
    const FrameHeader result{kResult, uint32_t(status == 0 ? result_payload(request) : sizeof status)};
    if (write_all(answers, &result, sizeof result, forever) != Io::ok ||
        write_all(answers, &status, sizeof status, forever) != Io::ok)
      _exit(0);
    for (int b = 0; b < kBuffers && status == 0; ++b)
      if (written(request, b) && write_all(answers, all[b]->data, sizes[b], forever) != Io::ok) _exit(0);
  }
  _exit(0);
}

std::string signal_name(int signal) {
  const char* name = sigabbrev_np(signal);
  return name ? std::string("SIG") + name : "signal " + std::to_string(signal);
}

// Where a fault lay, as a finding says it ("" when the signal gave no address).
std::string fault_place(const Fault& f) {
  constexpr int64_t kNear = int64_t(64) << 20;  // farther past a buffer than this is not that buffer's overrun
  const bool named = f.buffer >= 0 && f.buffer < kBuffers && f.distance >= 0;
  const std::string name = named ? kBufferNames[f.buffer] : "",
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

// A child process's stderr: a file of its own (unlinked), read back after each call.
int stderr_file() {
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/attncheck-stderr-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) throw std::runtime_error("cannot create a file for the command's stderr in " + path.substr(0, path.rfind('/')));
  unlink(path.c_str());
  fcntl(fd, F_SETFL, O_APPEND);  // after the checker truncates it, the child writes from the start again
  return fd;
}

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

// The keeper of a command's process group: the checker's child, which runs the command as its own
// child and ends as it ends (the same exit status, or the same signal). When the checker dies,
// killed even by SIGKILL, the keeper is told (PR_SET_PDEATHSIG) and ends what the command started,
// which would otherwise outlive the checker: the flag ends its wait, and it ends them there.
volatile sig_atomic_t g_checker_gone = 0;
void on_checker_death(int) { g_checker_gone = 1; }

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

// `root`'s descendants (and `root` when `with_root`) ended. Each is stopped first, scan after scan
// until a scan finds nobody new: a stopped process cannot fork, so a child forked while /proc was
// read is found by the next scan. Killed after one scan, such a child could setsid and escape.
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

}  // namespace

// ---- The checker's side ----

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

// What a frame from the child means during a call or a start-up: how the call ended, or nothing yet.
std::optional<Outcome> IsolatedKernel::receive(const char* during, const Deadline& deadline, const void* request,
                                               void* const (&into)[kBuffers], const char* entry_point, Hello* hello) {
  // The end of the call when the child closes its output (its fate) or stops answering (a hang).
  auto lost = [&](Io io) { return io == Io::closed ? fate(during) : hung(during); };
  FrameHeader frame;
  if (const Io io = read_all(from_child_, &frame, sizeof frame, deadline); io != Io::ok) return lost(io);
  // A payload whose length this frame cannot have is a broken protocol; nothing is allocated for it.
  // The bytes shown are those received: the header, what of the payload was read (`taken`, n bytes:
  // a RSLT's status), then what follows.
  auto broken = [&](const std::string& why, const void* taken = nullptr, size_t n = 0) {
    uint8_t more[56];
    size_t got = 0;
    pollfd ready{from_child_, POLLIN, 0};
    if (poll(&ready, 1, 50) > 0) {
      const ssize_t r = read(from_child_, more, sizeof more);
      got = r > 0 ? size_t(r) : 0;
    }
    std::string bytes(reinterpret_cast<const char*>(&frame), sizeof frame);
    bytes.append(static_cast<const char*>(taken), n);
    bytes.append(reinterpret_cast<const char*>(more), got);
    stop();
    return Outcome{Outcome::broke_protocol, 0,
                   "broke the protocol (docs/protocol.md) while " + std::string(during) + ": " + why + "; it sent " +
                       show_bytes(bytes.data(), bytes.size())};
  };
  auto payload = [&](void* into_bytes, size_t n) -> std::optional<Outcome> {
    if (frame.length != n) return broken("a " + std::string(frame.tag.name, 4) + " frame of " + std::to_string(n) + " bytes");
    if (const Io io = read_all(from_child_, into_bytes, n, deadline); io != Io::ok) return lost(io);
    return std::nullopt;
  };
  // The plugin host's own frames: a command that sends one forges what only the host can see.
  if (command_ && (frame.tag == kMode || frame.tag == kStray || frame.tag == kFault))
    return broken("a " + std::string(frame.tag.name, 4) + " frame, which only attncheck's plugin host sends");
  if (frame.tag == kMode) {
    uint64_t control;
    if (auto end = payload(&control, sizeof control)) return end;
    const FpMode mode{control};
    if (!have_mode_)
      have_mode_ = true;
    else if (fp_mode_finding_.empty())
      fp_mode_finding_ = hello ? fp_mode_finding_at_load(mode_, mode) : fp_mode_finding_in_call(entry_point, mode_, mode);
    mode_ = mode;
    return std::nullopt;
  }
  if (frame.tag == kFail || (frame.tag == kNotTaken && !hello)) {
    if (frame.length > kLongestFail) return broken("a " + std::string(frame.tag.name, 4) + " frame of at most 65536 bytes");
    std::string text(frame.length, '\0');
    if (auto end = payload(text.data(), text.size())) return end;
    text = printable(text, kShownFail);
    if (frame.tag == kNotTaken) return Outcome{Outcome::not_taken, 0, text};
    if (hello) {
      stop();
      return Outcome{Outcome::refused, 0, text};
    }
    return Outcome{Outcome::raised, 0, "raised " + text};
  }
  if (hello) {
    if (!(frame.tag == kHello)) return broken(command_ ? "expected HELO (or FAIL)" : "expected HELO (or FAIL, MODE)");
    // 12 bytes, or 108 with the domain (a HELO from before restrictions takes every problem).
    *hello = Hello{};
    if (frame.length != kHelloWithoutDomain && frame.length != sizeof *hello)
      return broken("a HELO frame of 12 or " + std::to_string(sizeof *hello) + " bytes");
    if (auto end = payload(hello, frame.length)) return end;
    if (hello->protocol != kVersion)
      return broken("it speaks protocol version " + std::to_string(hello->protocol) + ", this checker " +
                    std::to_string(kVersion));
    if (hello->abi != 1 && hello->abi != 2) return broken("its HELO names ABI " + std::to_string(hello->abi) + ", not 1 or 2");
    const Domain domain{hello->restrictions, limits_from_abi(hello->limits)};
    if (const std::string why = domain_error(domain, hello->capabilities); !why.empty())
      return broken("its HELO declares " + why);
    return Outcome{};
  }
  const Request& headers = *static_cast<const Request*>(request);
  const ProblemHeader& r = headers.header;
  if (frame.tag == kStray) {
    int32_t stray[2];
    if (auto end = payload(stray, sizeof stray)) return end;
    if (stray[0] >= 0 && stray[0] < kBuffers) stray_ = {stray[0], stray[1]};
    return std::nullopt;
  }
  if (frame.tag == kFault) {
    Fault fault;
    if (auto end = payload(&fault, sizeof fault)) return end;
    Outcome dead = fate(during);
    if (const std::string where = fault_place(fault); !where.empty())
      dead.detail = "crashed with " + signal_name(fault.signal) + ": " + where;
    return dead;
  }
  if (!(frame.tag == kResult)) return broken("expected RSLT (or FAIL" + std::string(command_ ? ")" : ", MODE, STRY, FALT)"));
  int32_t status;
  if (frame.length != sizeof status && frame.length != result_payload(headers))
    return broken("a RSLT frame of 4 bytes (a refusal) or " + std::to_string(result_payload(headers)) + " (the status and " +
                  (r.flags & kLayer      ? (r.flags & kWantWeights ? "out, weights)" : "out)")
                   : r.flags & kBackward ? "dq, dk, dv)"
                   : r.flags & kWantKeep ? (r.flags & kWantLse ? "out, keep, lse)" : "out, keep)")
                   : r.flags & kWantLse  ? "out, lse)"
                                         : "out)"));
  if (const Io io = read_all(from_child_, &status, sizeof status, deadline); io != Io::ok) return lost(io);
  if (status != 0 && frame.length != sizeof status)
    return broken("a refusal's RSLT carries the status alone", &status, sizeof status);
  if (status == 0 && frame.length == sizeof status)
    return broken("a RSLT with status 0 carries the outputs", &status, sizeof status);
  size_t sizes[kBuffers];
  buffer_sizes(headers, sizes);
  for (int b = 0; b < kBuffers && status == 0; ++b)
    if (written(headers, b))
      if (const Io io = read_all(from_child_, into[b], sizes[b], deadline); io != Io::ok) return lost(io);
  if (stray_.first >= 0)
    return Outcome{Outcome::stray_write, 0,
                   std::string("wrote outside its output: ") +
                       (stray_.second == 0 ? "before the start of " : "past the end of ") + kBufferNames[stray_.first] +
                       " (canary bytes changed)"};
  if (status != 0) return Outcome{Outcome::refused, status, "refused a valid problem (returned " + std::to_string(status) + ")"};
  return Outcome{};
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

namespace {

// The PROB headers for case c (its problem's ABI view `abi`): the forward, or with `backward` the backward.
template <class T>
Request request_for(const Case<T>& c, const attncheck_problem_v2& abi, bool want_lse, bool backward, bool want_keep = false) {
  const Shape& s = c.shape;
  uint32_t flags = 0;
  const CallView call = call_view(c.problem(), want_lse, backward, want_keep);
  for (const Feature& f : features())
    if (f.used(call)) flags |= f.protocol_flag;
  return {{abi.dtype, flags, int32_t(s.B), int32_t(s.H), int32_t(s.kv_heads()), int32_t(s.Tq), int32_t(s.Tk), int32_t(s.dk),
           int32_t(s.dv), int32_t(c.causal), int32_t(c.window_left), int32_t(c.window_right), c.scale, c.softcap},
          {c.dropout_p, c.dropout_seed}};
}

}  // namespace

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
  const ProblemHeader& request = headers.header;
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
  if (sent == Io::ok) sent = write_all(to_child_, &request, sizeof request, deadline);
  if (sent == Io::ok && (request.flags & kDropout))
    sent = write_all(to_child_, &headers.dropout, sizeof headers.dropout, deadline);
  if (sent == Io::ok && (request.flags & kLayer)) sent = write_all(to_child_, &headers.layer, sizeof headers.layer, deadline);
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

template <class T>
Outcome IsolatedKernel::run(const Case<T>& c, std::vector<T>& out, std::vector<T>* lse, std::vector<uint8_t>* keep) {
  // c: Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], allow [B,Tq,Tk], key lengths [B], bias
  // [B,H,Tq,Tk]; out [B,H,Tq,dv] and, when asked, lse [B,H,Tq] and the dropout keep mask [B,H,Tq,Tk].
  if (child_ < 0 && !past_budget()) start();
  const Shape& s = c.shape;
  // A case that does not fill its shape, or uses what the plugin does not claim, is the harness's
  // fault: say so, never blame the kernel.
  if (int64_t(c.q.size()) != s.q_size() || int64_t(c.k.size()) != s.k_size() || int64_t(c.v.size()) != s.v_size())
    throw std::logic_error("a case whose tensors do not fit its shape");
  const Problem<T> problem = c.problem();
  const bool want_keep = keep && c.dropout_p > 0;
  require_sendable(call_view(problem, lse != nullptr, false, want_keep), capabilities_,
                   domain_);  // a v1 plugin's: what ABI v1 carries
  out.resize(size_t(s.out_size()));
  if (lse) lse->resize(size_t(s.lse_size()));
  if (keep) keep->assign(want_keep ? size_t(s.scores_size()) : 0, kUnwrittenKeep);
  NarrowBuffers narrow;  // f16 and bf16 as bit patterns
  const attncheck_problem_v2 abi =
      to_abi_v2(problem, out.data(), lse ? lse->data() : nullptr, narrow, want_keep ? keep->data() : nullptr);
  const Request request = request_for(c, abi, lse != nullptr, false, want_keep);
  const void* const buffers[kBuffers] = {abi.q, abi.k, abi.v, c.allow.data(), c.key_lengths.data(), abi.bias};
  void* const into[kBuffers] = {nullptr, nullptr, nullptr, nullptr,          nullptr,
                                nullptr, nullptr, abi.out, abi.dropout_keep, abi.lse};
  const Outcome outcome = exchange(request, buffers, into, entry_point_name(version_, std::is_same_v<T, float>));
  widen_output(problem, narrow, out.data());
  return outcome;
}

template <class T>
Outcome IsolatedKernel::run_backward(const Case<T>& c, const Grads<T>& grads) {
  // c as run's; grads: out, dout [B,H,Tq,dv] and lse [B,H,Tq] in, dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk]
  // and dv [B,H_kv,Tk,dv] out.
  if (child_ < 0 && !past_budget()) start();
  const Problem<T> problem = c.problem();
  require_sendable(call_view(problem, false, true), capabilities_, domain_);
  NarrowBuffers narrow;
  NarrowGrads narrow_grads;
  attncheck_problem_v2 forward;
  const attncheck_grads_v2 abi = to_abi_grads(problem, grads, forward, narrow, narrow_grads);
  const Request request = request_for(c, forward, false, true);
  const void* const buffers[kBuffers] = {forward.q,    forward.k, forward.v,   c.allow.data(), c.key_lengths.data(),
                                         forward.bias, abi.dout,  forward.out, nullptr,        forward.lse};
  void* const into[kBuffers] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                nullptr, nullptr, nullptr, abi.dq,  abi.dk,  abi.dv};
  const Outcome outcome = exchange(request, buffers, into, "attncheck_backward_v2");
  widen_grads(problem, narrow_grads, grads);
  return outcome;
}

template <class T>
Outcome IsolatedKernel::run_layer(const LayerCase<T>& c, std::vector<T>& out, std::vector<T>* weights) {
  // c: x_q [B,Tq,D], x_kv [B,Tk,D], the maps and biases (layer.hpp), allow [B,Tq,Tk], key lengths
  // [B]; out [B,Tq,D] and, when asked, weights [B,H,Tq,Tk].
  if (child_ < 0 && !past_budget()) start();
  const Layer<T> layer = c.layer();
  const Shape& h = c.shape.heads;
  require_sendable(layer_call_view(layer, weights != nullptr), capabilities_, domain_);
  out.resize(size_t(c.shape.out_size()));
  if (weights) weights->resize(size_t(h.scores_size()));
  NarrowLayer narrow;
  const attncheck_mha_v2 abi = to_abi_mha(layer, out.data(), weights ? weights->data() : nullptr, narrow);
  uint32_t flags = 0;
  for (const Feature& f : features())
    if (f.used(layer_call_view(layer, weights != nullptr))) flags |= f.protocol_flag;
  const uint32_t parts = (c.self_attention ? LayerHeader::kSelf : 0) | (abi.b_q ? LayerHeader::kBiasQ : 0) |
                         (abi.b_k ? LayerHeader::kBiasK : 0) | (abi.b_v ? LayerHeader::kBiasV : 0) |
                         (abi.b_o ? LayerHeader::kBiasO : 0);
  const Request request{{abi.dtype, flags, abi.batch, abi.heads, abi.kv_heads, abi.q_len, abi.kv_len, abi.d_k, abi.d_v,
                         abi.causal, abi.window_left, abi.window_right, abi.scale, 0},
                        {},
                        {abi.d_model, parts, 0}};
  const void* buffers[kBuffers] = {};
  buffers[ALLOW] = c.allow.data();
  buffers[KV_LENS] = c.key_lengths.data();
  const void* const inputs[] = {abi.x_q, abi.x_kv, abi.w_q, abi.w_k, abi.w_v, abi.b_q, abi.b_k, abi.b_v, abi.w_o, abi.b_o};
  for (int n = 0; n < kLayerInputCount; ++n) buffers[X_Q + n] = inputs[n];
  void* into[kBuffers] = {};
  into[OUT] = abi.out;
  into[WEIGHTS] = abi.weights;
  const Outcome outcome = exchange(request, buffers, into, "attncheck_mha_forward_v2");
  widen_layer_output(layer, narrow, out.data());
  return outcome;
}

template Outcome IsolatedKernel::run_layer(const LayerCase<float>&, std::vector<float>&, std::vector<float>*);
template Outcome IsolatedKernel::run_layer(const LayerCase<double>&, std::vector<double>&, std::vector<double>*);
template Outcome IsolatedKernel::run(const Case<float>&, std::vector<float>&, std::vector<float>*, std::vector<uint8_t>*);
template Outcome IsolatedKernel::run(const Case<double>&, std::vector<double>&, std::vector<double>*, std::vector<uint8_t>*);
template Outcome IsolatedKernel::run_backward(const Case<float>&, const Grads<float>&);
template Outcome IsolatedKernel::run_backward(const Case<double>&, const Grads<double>&);

}  // namespace attncheck
