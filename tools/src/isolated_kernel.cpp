#include "attncheck/isolated_kernel.hpp"

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include "attncheck/abi.hpp"
#include "attncheck/fp_mode.hpp"
#include "attncheck/plugin_loader.hpp"

namespace attncheck {
namespace {

constexpr uint32_t kRequest = 0x41544351, kAnswer = 0x41544341, kFault = 0x41544346;
constexpr uint8_t kCanary = 0xA5;
const char* const kBufferNames[] = {"q", "k", "v", "allow", "kv_lens", "bias", "dout", "out", "lse", "dq", "dk", "dv"};
enum Buffer { Q, K, V, ALLOW, KV_LENS, BIAS, DOUT, OUT, LSE, DQ, DK, DV, kBuffers };
static_assert(kBuffers == 12, "IsolatedKernel::exchange takes the buffers as arrays of 12");

// The problem as it crosses the pipe: the contract's fields, then the bytes of every buffer the
// call reads (q, k, v and allow, kv_lens and bias when present; for the backward also dout and the
// given out and lse), in Buffer order. The child hands them to the plugin through its ABI (v1: key
// lengths folded into the allow mask).
struct Request {
  uint32_t magic;
  int32_t dtype;  // the problem's format, ABI v2's ATTNCHECK_F32 .. ATTNCHECK_BF16
  int64_t B, H, H_kv, Tq, Tk, dk, dv;
  int32_t causal, window_left, window_right;
  double scale, softcap;
  uint8_t has_allow, has_kv_lens, has_bias, want_lse, backward;
};

// Whether a call writes buffer b: the forward out and lse; the backward dq, dk and dv. The others
// it only reads.
bool written(const Request& r, int b) { return r.backward ? b >= DQ : b == OUT || b == LSE; }

// The bytes of one element of q, k, v, bias and out in a format; lse is float but in f64.
size_t element_size(int32_t dtype) { return dtype == ATTNCHECK_F64 ? 8 : dtype == ATTNCHECK_F32 ? 4 : 2; }
size_t lse_element_size(int32_t dtype) { return dtype == ATTNCHECK_F64 ? 8 : 4; }

// Each buffer's bytes for a request, in Buffer order.
void buffer_sizes(const Request& r, size_t (&sizes)[kBuffers]) {
  const size_t e = element_size(r.dtype), bh = size_t(r.B * r.H), bkv = size_t(r.B * r.H_kv);
  const size_t grads = r.backward ? 1 : 0;
  const size_t all[kBuffers] = {bh * r.Tq * r.dk * e,
                                bkv * r.Tk * r.dk * e,
                                bkv * r.Tk * r.dv * e,
                                r.has_allow ? size_t(r.B * r.Tq * r.Tk) : 0,
                                r.has_kv_lens ? size_t(r.B) * sizeof(int32_t) : 0,
                                r.has_bias ? bh * r.Tq * r.Tk * e : 0,
                                grads * bh * r.Tq * r.dv * e,
                                bh * r.Tq * r.dv * e,
                                r.want_lse || r.backward ? bh * r.Tq * lse_element_size(r.dtype) : 0,
                                grads * bh * r.Tq * r.dk * e,
                                grads * bkv * r.Tk * r.dk * e,
                                grads * bkv * r.Tk * r.dv * e};
  std::copy(std::begin(all), std::end(all), sizes);
}

// The answer: the plugin's status and a stray-write report, then out's bytes; or, from the
// child's SIGSEGV handler, a fault naming the buffer.
struct Answer {
  uint32_t magic;
  int32_t status;
  int32_t buffer;  // Buffer, or -1
  int32_t where;   // 0 before the start, 1 past the end, 2 inside a read-only input
  FpMode mode;     // the floating-point mode after the call
};

bool write_all(int fd, const void* data, size_t n) {
  auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

bool read_all(int fd, void* data, size_t n) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

// Waits until fd has data or `seconds` pass (EINTR retried; the wait is capped at a day).
bool readable_within(int fd, double seconds) {
  const int ms = int(std::min(seconds, 86400.0) * 1000);
  pollfd wait{fd, POLLIN, 0};
  int ready;
  do ready = poll(&wait, 1, ms);
  while (ready < 0 && errno == EINTR);
  return ready > 0;
}

// ---- The child ----

// n bytes between two guard pages, 64-byte aligned and flush with the trailing guard (or, at_start,
// with the leading one), canary bytes in the slack. Calls alternate the two placements, so that
// reads past either end meet a guard page in one call or the other.
struct Guarded {
  uint8_t *base = nullptr, *pages = nullptr, *data = nullptr;
  size_t page = 0, data_pages_bytes = 0, n = 0;
  Guarded(size_t bytes, bool at_start) : page(size_t(sysconf(_SC_PAGESIZE))), n(bytes) {
    const size_t rounded = (n + 63) / 64 * 64;
    data_pages_bytes = (std::max<size_t>(rounded, 1) + page - 1) / page * page;
    void* mem = mmap(nullptr, data_pages_bytes + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) _exit(70);
    base = static_cast<uint8_t*>(mem);
    pages = base + page;
    data = at_start ? pages : pages + data_pages_bytes - rounded;
    std::memset(pages, kCanary, data_pages_bytes);
    mprotect(base, page, PROT_NONE);
    mprotect(pages + data_pages_bytes, page, PROT_NONE);
  }
  ~Guarded() { munmap(base, data_pages_bytes + 2 * page); }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
  void read_only() { mprotect(pages, data_pages_bytes, PROT_READ); }
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

void on_fault(int signal, siginfo_t* info, void*) {
  const auto* address = static_cast<const uint8_t*>(info->si_addr);
  Answer fault{kFault, signal, -1, -1, {}};
  for (int b = 0; b < kBuffers; ++b) {
    const Guarded* g = g_buffers[b];
    if (!g) continue;
    if (address >= g->base && address < g->pages) fault = {kFault, signal, b, 0, {}};
    if (address >= g->pages + g->data_pages_bytes && address < g->pages + g->data_pages_bytes + g->page)
      fault = {kFault, signal, b, 1, {}};
    if (address >= g->pages && address < g->pages + g->data_pages_bytes && !g_written[b]) fault = {kFault, signal, b, 2, {}};
  }
  ssize_t ignored = write(g_answer_fd, &fault, sizeof fault);
  (void)ignored;
  ::signal(signal, SIG_DFL);
  raise(signal);
}

[[noreturn]] void child_main(const std::string& which, int requests, int answers) {
  g_answer_fd = answers;
  // The load report: ok, the ABI version and capabilities, the floating-point mode before and after
  // loading, then the reason's length and text. The mode the library leaves is kept: it is what a
  // program gets.
  Plugin plugin;
  std::string error;
  const FpMode before = current_fp_mode();
  try {
    plugin = load_plugin(which);
  } catch (const std::exception& e) {
    error = e.what();
  }
  const FpMode modes[2] = {before, current_fp_mode()};
  const uint32_t report[3] = {uint32_t(error.empty()), uint32_t(plugin.version), plugin.capabilities};
  const uint32_t length = uint32_t(error.size());
  if (!write_all(answers, report, sizeof report) || !write_all(answers, modes, sizeof modes) ||
      !write_all(answers, &length, 4) || !write_all(answers, error.data(), length))
    _exit(0);
  if (!error.empty()) _exit(0);

  struct sigaction action {};
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &action, nullptr);
  sigaction(SIGBUS, &action, nullptr);

  Request r;
  for (uint64_t call = 0; read_all(requests, &r, sizeof r); ++call) {
    if (r.magic != kRequest) _exit(71);
    size_t sizes[kBuffers];
    buffer_sizes(r, sizes);
    const bool at_start = call % 2 == 1;
    std::optional<Guarded> all[kBuffers];
    for (int b = 0; b < kBuffers; ++b) all[b].emplace(sizes[b], at_start);
    for (int b = 0; b < kBuffers; ++b) {
      if (written(r, b)) continue;
      if (!read_all(requests, all[b]->data, sizes[b])) _exit(0);
      all[b]->read_only();
    }
    // Unwritten outputs read as NaN.
    for (int b = 0; b < kBuffers; ++b) {
      if (!written(r, b)) continue;
      Guarded& buffer = *all[b];
      visit_format(b == LSE ? (r.dtype == ATTNCHECK_F64 ? Format::f64 : Format::f32) : Format(r.dtype), [&](auto zero) {
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
    v2.batch = int32_t(r.B);
    v2.heads = int32_t(r.H);
    v2.kv_heads = int32_t(r.H_kv);
    v2.q_len = int32_t(r.Tq);
    v2.kv_len = int32_t(r.Tk);
    v2.d_k = int32_t(r.dk);
    v2.d_v = int32_t(r.dv);
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
    auto call_v1 = [&](auto zero) {
      using T = decltype(zero);
      std::vector<uint8_t> folded;
      const attncheck_problem v1 = to_abi(from_abi_v2<T>(v2), static_cast<T*>(v2.out), folded);
      return (r.dtype == ATTNCHECK_F64 ? plugin.forward_f64 : plugin.forward_f32)(&v1);
    };
    const attncheck_grads_v2 grads{&v2, data(DOUT), data(DQ), data(DK), data(DV)};
    for (int b = 0; b < kBuffers; ++b) {
      g_buffers[b] = &*all[b];
      g_written[b] = written(r, b);
    }
    const int32_t status = r.backward             ? (plugin.backward_v2 ? plugin.backward_v2(&grads) : 4)
                           : plugin.version != 1   ? plugin.forward_v2(&v2)
                           : r.dtype == ATTNCHECK_F64 ? call_v1(0.0)
                                                   : call_v1(0.0f);
    for (int b = 0; b < kBuffers; ++b) g_buffers[b] = nullptr;

    // The answer: the first written buffer whose canaries changed, then every written buffer.
    Answer answer{kAnswer, status, -1, -1, current_fp_mode()};
    for (int b = 0; b < kBuffers && answer.buffer < 0; ++b)
      if (const int damage = written(r, b) ? all[b]->damaged() : -1; damage >= 0)
        answer = {kAnswer, status, b, damage, answer.mode};
    if (!write_all(answers, &answer, sizeof answer)) _exit(0);
    for (int b = 0; b < kBuffers; ++b)
      if (written(r, b) && !write_all(answers, all[b]->data, sizes[b])) _exit(0);
  }
  _exit(0);
}

std::string signal_name(int signal) {
  const char* name = sigabbrev_np(signal);
  return name ? std::string("SIG") + name : "signal " + std::to_string(signal);
}

}  // namespace

// ---- The parent ----

IsolatedKernel::IsolatedKernel(std::string which, double case_timeout_seconds)
    : which_(std::move(which)), timeout_(case_timeout_seconds) {}

IsolatedKernel::~IsolatedKernel() { stop(); }

void IsolatedKernel::stop() {
  if (child_ > 0) {
    kill(child_, SIGKILL);
    waitpid(child_, nullptr, 0);
  }
  if (to_child_ >= 0) close(to_child_);
  if (from_child_ >= 0) close(from_child_);
  child_ = -1;
  to_child_ = from_child_ = -1;
}

void IsolatedKernel::start() {
  stop();
  signal(SIGPIPE, SIG_IGN);  // a dead child must give an error on write, not kill the checker
  int requests[2], answers[2];
  if (pipe(requests) != 0 || pipe(answers) != 0) throw std::runtime_error("cannot create pipes for the child");
  std::fflush(nullptr);  // else a plugin's exit() would flush the child's copy of our buffered output
  child_ = fork();
  if (child_ < 0) throw std::runtime_error("cannot fork the child that runs the implementation");
  if (child_ == 0) {
    close(requests[1]);
    close(answers[0]);
    child_main(which_, requests[0], answers[1]);
  }
  close(requests[0]);
  close(answers[1]);
  to_child_ = requests[1];
  from_child_ = answers[0];
  uint32_t report[3];
  FpMode modes[2];
  uint32_t length = 0;
  if (!readable_within(from_child_, timeout_)) {
    stop();
    throw std::runtime_error(which_ + ": hung while loading (no answer within the case timeout)");
  }
  if (!read_all(from_child_, report, sizeof report) || !read_all(from_child_, modes, sizeof modes) ||
      !read_all(from_child_, &length, 4) || length > 4096) {
    const Outcome dead = fate("loading the plugin");
    throw std::runtime_error(which_ + ": " + dead.detail);
  }
  std::string error(length, '\0');
  read_all(from_child_, error.data(), length);
  if (!report[0]) {
    stop();
    throw std::runtime_error(error);
  }
  version_ = int32_t(report[1]);
  capabilities_ = report[2];
  mode_ = modes[1];
  if (fp_mode_finding_.empty()) fp_mode_finding_ = fp_mode_finding_at_load(modes[0], modes[1]);
}

Outcome IsolatedKernel::fate(const char* waiting_for) {
  int status = 0;
  Outcome outcome;
  if (child_ > 0 && waitpid(child_, &status, 0) == child_) {
    if (WIFSIGNALED(status)) {
      outcome = {Outcome::crashed, WTERMSIG(status),
                 "crashed with " + signal_name(WTERMSIG(status)) + " while " + waiting_for};
    } else {
      outcome = {Outcome::exited, WEXITSTATUS(status),
                 "exited with status " + std::to_string(WEXITSTATUS(status)) + " while " + waiting_for};
    }
    child_ = -1;
  }
  stop();
  return outcome;
}

namespace {

// The request for case c (its problem's ABI view `abi`): the forward, or with `backward` the backward.
template <class T>
Request request_for(const Case<T>& c, const attncheck_problem_v2& abi, bool want_lse, bool backward) {
  const Shape& s = c.shape;
  return {kRequest,        abi.dtype,
          s.B,             s.H,
          s.kv_heads(),    s.Tq,
          s.Tk,            s.dk,
          s.dv,            int32_t(c.causal),
          int32_t(c.window_left), int32_t(c.window_right),
          c.scale,         c.softcap,
          uint8_t(!c.allow.empty()), uint8_t(!c.key_lengths.empty()),
          uint8_t(!c.bias.empty()),  uint8_t(want_lse), uint8_t(backward)};
}

}  // namespace

Outcome IsolatedKernel::exchange(const void* request_bytes, const void* const (&buffers)[12], void* const (&into)[12],
                                 const char* entry_point) {
  const Request& request = *static_cast<const Request*>(request_bytes);
  size_t sizes[kBuffers];
  buffer_sizes(request, sizes);
  bool sent = write_all(to_child_, &request, sizeof request);
  for (int b = 0; b < kBuffers && sent; ++b)
    if (!written(request, b)) sent = sizes[b] == 0 || write_all(to_child_, buffers[b], sizes[b]);
  if (!sent) return fate("reading its input");

  if (!readable_within(from_child_, timeout_)) {
    stop();
    char detail[96];
    std::snprintf(detail, sizeof detail, "hung: no answer within %g s (the child was killed)", timeout_);
    return {Outcome::hung, 0, detail};
  }
  Answer answer;
  if (!read_all(from_child_, &answer, sizeof answer)) return fate("computing");
  if (answer.magic == kFault) {
    Outcome dead = fate("computing");
    const char* wheres[] = {"it touched the guard page before the start of ", "it touched the guard page past the end of ",
                            "it wrote into the read-only input "};
    if (answer.buffer >= 0)
      dead.detail = "crashed with " + signal_name(answer.status) + ": " + wheres[answer.where] + kBufferNames[answer.buffer];
    return dead;
  }
  bool received = answer.magic == kAnswer;
  for (int b = 0; b < kBuffers && received; ++b)
    if (written(request, b)) received = read_all(from_child_, into[b], sizes[b]);
  if (!received) return fate("returning its output");
  if (fp_mode_finding_.empty()) fp_mode_finding_ = fp_mode_finding_in_call(entry_point, mode_, answer.mode);
  mode_ = answer.mode;
  if (answer.buffer >= 0)
    return {Outcome::stray_write, 0,
            std::string("wrote outside its output: ") + (answer.where == 0 ? "before the start of " : "past the end of ") +
                kBufferNames[answer.buffer] + " (canary bytes changed)"};
  if (answer.status != 0)
    return {Outcome::refused, answer.status, "refused a valid problem (returned " + std::to_string(answer.status) + ")"};
  return {};
}

template <class T>
Outcome IsolatedKernel::run(const Case<T>& c, std::vector<T>& out, std::vector<T>* lse) {
  // c: Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], allow [B,Tq,Tk], key lengths [B], bias
  // [B,H,Tq,Tk]; out [B,H,Tq,dv] and, when asked, lse [B,H,Tq].
  if (child_ < 0) start();
  const Shape& s = c.shape;
  // A case that does not fill its shape, or asks what the plugin does not take, is the harness's
  // fault: say so, never blame the kernel.
  if (int64_t(c.q.size()) != s.q_size() || int64_t(c.k.size()) != s.k_size() || int64_t(c.v.size()) != s.v_size())
    throw std::logic_error("a case whose tensors do not fit its shape");
  if (version_ == 1 && (is_narrow(c.format) || s.kv_heads() != s.H || !c.bias.empty() || c.window_left >= 0 ||
                        c.window_right >= 0 || c.softcap != 0 || lse))
    throw std::logic_error("a case beyond plugin ABI v1 for a v1 plugin");
  const Problem<T> problem = c.problem();
  out.resize(size_t(s.out_size()));
  if (lse) lse->resize(size_t(s.lse_size()));
  NarrowBuffers narrow;  // f16 and bf16 as bit patterns
  const attncheck_problem_v2 abi = to_abi_v2(problem, out.data(), lse ? lse->data() : nullptr, narrow);
  const Request request = request_for(c, abi, lse != nullptr, false);
  const void* const buffers[kBuffers] = {abi.q, abi.k, abi.v, c.allow.data(), c.key_lengths.data(), abi.bias};
  void* const into[kBuffers] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, abi.out, abi.lse};
  const Outcome outcome = exchange(&request, buffers, into, entry_point_name(version_, std::is_same_v<T, float>));
  widen_output(problem, narrow, out.data());
  return outcome;
}

template <class T>
Outcome IsolatedKernel::run_backward(const Case<T>& c, const Grads<T>& grads) {
  // c as run's; grads: out, dout [B,H,Tq,dv] and lse [B,H,Tq] in, dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk]
  // and dv [B,H_kv,Tk,dv] out.
  if (child_ < 0) start();
  if (!(capabilities_ & ATTNCHECK_CAP_BACKWARD)) throw std::logic_error("a backward for a plugin that claims none");
  const Problem<T> problem = c.problem();
  NarrowBuffers narrow;
  NarrowGrads narrow_grads;
  attncheck_problem_v2 forward;
  const attncheck_grads_v2 abi = to_abi_grads(problem, grads, forward, narrow, narrow_grads);
  const Request request = request_for(c, forward, false, true);
  const void* const buffers[kBuffers] = {forward.q, forward.k, forward.v, c.allow.data(), c.key_lengths.data(),
                                         forward.bias, abi.dout, forward.out, forward.lse};
  void* const into[kBuffers] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                nullptr, nullptr, nullptr, abi.dq,  abi.dk,  abi.dv};
  const Outcome outcome = exchange(&request, buffers, into, "attncheck_backward_v2");
  widen_grads(problem, narrow_grads, grads);
  return outcome;
}

template Outcome IsolatedKernel::run(const Case<float>&, std::vector<float>&, std::vector<float>*);
template Outcome IsolatedKernel::run(const Case<double>&, std::vector<double>&, std::vector<double>*);
template Outcome IsolatedKernel::run_backward(const Case<float>&, const Grads<float>&);
template Outcome IsolatedKernel::run_backward(const Case<double>&, const Grads<double>&);

}  // namespace attncheck
