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
#include <stdexcept>
#include <type_traits>

#include "attncheck/abi.hpp"
#include "attncheck/fp_mode.hpp"
#include "attncheck/plugin_loader.hpp"

namespace attncheck {
namespace {

constexpr uint32_t kRequest = 0x41544351, kAnswer = 0x41544341, kFault = 0x41544346;
constexpr uint8_t kCanary = 0xA5;
const char* const kBufferNames[] = {"q", "k", "v", "allow", "kv_lens", "bias", "out", "lse"};
enum Buffer { Q, K, V, ALLOW, KV_LENS, BIAS, OUT, LSE, kBuffers };
constexpr Buffer kFirstOutput = OUT;  // the buffers from OUT on are written; the others read-only

// The problem as it crosses the pipe: the contract's fields, then the bytes of q, k, v and of
// allow, kv_lens and bias when present. The child hands them to the plugin through its ABI (v1:
// key lengths folded into the allow mask).
struct Request {
  uint32_t magic;
  int32_t dtype;  // the problem's format, ABI v2's ATTNCHECK_F32 .. ATTNCHECK_BF16
  int64_t B, H, H_kv, Tq, Tk, dk, dv;
  int32_t causal, window_left, window_right;
  double scale, softcap;
  uint8_t has_allow, has_kv_lens, has_bias, want_lse;
};

// Each buffer's bytes for a request: q, k, v, allow, kv_lens, bias, out, lse.
// The bytes of one element of q, k, v, bias and out in a format; lse is float but in f64.
size_t element_size(int32_t dtype) { return dtype == ATTNCHECK_F64 ? 8 : dtype == ATTNCHECK_F32 ? 4 : 2; }
size_t lse_element_size(int32_t dtype) { return dtype == ATTNCHECK_F64 ? 8 : 4; }

void buffer_sizes(const Request& r, size_t (&sizes)[kBuffers]) {
  const size_t e = element_size(r.dtype), bh = size_t(r.B * r.H), bkv = size_t(r.B * r.H_kv);
  const size_t all[kBuffers] = {bh * r.Tq * r.dk * e,
                                bkv * r.Tk * r.dk * e,
                                bkv * r.Tk * r.dv * e,
                                r.has_allow ? size_t(r.B * r.Tq * r.Tk) : 0,
                                r.has_kv_lens ? size_t(r.B) * sizeof(int32_t) : 0,
                                r.has_bias ? bh * r.Tq * r.Tk * e : 0,
                                bh * r.Tq * r.dv * e,
                                r.want_lse ? bh * r.Tq * lse_element_size(r.dtype) : 0};
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

// The current call's buffers, for the fault handler (set before the call, read in a signal).
Guarded* volatile g_buffers[kBuffers];
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
    if (address >= g->pages && address < g->pages + g->data_pages_bytes && b < kFirstOutput) fault = {kFault, signal, b, 2, {}};
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
    Guarded q(sizes[Q], at_start), k(sizes[K], at_start), v(sizes[V], at_start), allow(sizes[ALLOW], at_start),
        kv_lens(sizes[KV_LENS], at_start), bias(sizes[BIAS], at_start), out(sizes[OUT], at_start),
        lse(sizes[LSE], at_start);
    Guarded* all[kBuffers] = {&q, &k, &v, &allow, &kv_lens, &bias, &out, &lse};
    for (int b = 0; b < kFirstOutput; ++b) {
      if (!read_all(requests, all[b]->data, sizes[b])) _exit(0);
      all[b]->read_only();
    }
    // Unwritten outputs read as NaN.
    visit_format(Format(r.dtype), [&](auto zero) {
      using F = decltype(zero);
      const auto nan = Precision<F>::to_bits(Precision<F>::from_double(std::numeric_limits<double>::quiet_NaN()));
      for (size_t n = 0; n < out.n; n += sizeof nan) std::memcpy(out.data + n, &nan, sizeof nan);
    });
    for (size_t n = 0; n < lse.n; n += lse_element_size(r.dtype)) {
      const float nan_f = std::numeric_limits<float>::quiet_NaN();
      const double nan_d = std::numeric_limits<double>::quiet_NaN();
      std::memcpy(lse.data + n, r.dtype == ATTNCHECK_F64 ? (const void*)&nan_d : &nan_f, lse_element_size(r.dtype));
    }

    // The problem as ABI v2 carries it; a v1 plugin gets its v1 view (key lengths folded into allow).
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
    v2.q = q.data;
    v2.k = k.data;
    v2.v = v.data;
    v2.allow = r.has_allow ? allow.data : nullptr;
    v2.kv_lens = r.has_kv_lens ? reinterpret_cast<const int32_t*>(kv_lens.data) : nullptr;
    v2.bias = r.has_bias ? bias.data : nullptr;
    v2.causal = r.causal;
    v2.window_left = r.window_left;
    v2.window_right = r.window_right;
    v2.scale = r.scale;
    v2.softcap = r.softcap;
    v2.out = out.data;
    v2.lse = r.want_lse ? lse.data : nullptr;
    auto call_v1 = [&](auto zero) {
      using T = decltype(zero);
      std::vector<uint8_t> folded;
      const attncheck_problem v1 = to_abi(from_abi_v2<T>(v2), static_cast<T*>(v2.out), folded);
      return (r.dtype == ATTNCHECK_F64 ? plugin.forward_f64 : plugin.forward_f32)(&v1);
    };
    for (int b = 0; b < kBuffers; ++b) g_buffers[b] = all[b];
    const int32_t status = plugin.version != 1 ? plugin.forward_v2(&v2) : r.dtype == ATTNCHECK_F64 ? call_v1(0.0) : call_v1(0.0f);
    for (int b = 0; b < kBuffers; ++b) g_buffers[b] = nullptr;

    const int out_damage = out.damaged(), lse_damage = lse.damaged();
    const Answer answer{kAnswer, status, out_damage >= 0 ? OUT : lse_damage >= 0 ? LSE : -1,
                        out_damage >= 0 ? out_damage : lse_damage, current_fp_mode()};
    if (!write_all(answers, &answer, sizeof answer) || !write_all(answers, out.data, sizes[OUT]) ||
        !write_all(answers, lse.data, sizes[LSE]))
      _exit(0);
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
  const bool v1 = version_ == 1;
  if (v1 && (is_narrow(c.format) || s.kv_heads() != s.H || !c.bias.empty() || c.window_left >= 0 || c.window_right >= 0 || c.softcap != 0 ||
             lse))
    throw std::logic_error("a case beyond plugin ABI v1 for a v1 plugin");
  const Problem<T> problem = c.problem();
  NarrowBuffers narrow;  // f16 and bf16 as bit patterns
  const attncheck_problem_v2 abi = to_abi_v2(problem, out.data(), (T*)nullptr, narrow);
  const Request request{kRequest,        abi.dtype,
                        s.B,             s.H,
                        s.kv_heads(),    s.Tq,
                        s.Tk,            s.dk,
                        s.dv,            int32_t(c.causal),
                        int32_t(c.window_left), int32_t(c.window_right),
                        c.scale,         c.softcap,
                        uint8_t(!c.allow.empty()), uint8_t(!c.key_lengths.empty()),
                        uint8_t(!c.bias.empty()),  uint8_t(lse != nullptr)};
  size_t sizes[kBuffers];
  buffer_sizes(request, sizes);
  const void* inputs[kFirstOutput] = {abi.q, abi.k, abi.v, c.allow.data(), c.key_lengths.data(), abi.bias};
  bool sent = write_all(to_child_, &request, sizeof request);
  for (int b = 0; b < kFirstOutput && sent; ++b) sent = sizes[b] == 0 || write_all(to_child_, inputs[b], sizes[b]);
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
  out.resize(size_t(s.out_size()));
  if (lse) lse->resize(size_t(s.lse_size()));
  if (answer.magic != kAnswer || !read_all(from_child_, is_narrow(problem.format) ? (void*)narrow.out.data() : out.data(), sizes[OUT]) ||
      (lse && !read_all(from_child_, lse->data(), sizes[LSE])))
    return fate("returning its output");
  widen_output(problem, narrow, out.data());
  if (fp_mode_finding_.empty())
    fp_mode_finding_ = fp_mode_finding_in_call(entry_point_name(version_, std::is_same_v<T, float>), mode_, answer.mode);
  mode_ = answer.mode;
  if (answer.buffer == OUT || answer.buffer == LSE)
    return {Outcome::stray_write, 0,
            std::string("wrote outside its output: ") + (answer.where == 0 ? "before the start of " : "past the end of ") +
                kBufferNames[answer.buffer] + " (canary bytes changed)"};
  if (answer.status != 0)
    return {Outcome::refused, answer.status, "refused a valid problem (returned " + std::to_string(answer.status) + ")"};
  return {};
}

template Outcome IsolatedKernel::run(const Case<float>&, std::vector<float>&, std::vector<float>*);
template Outcome IsolatedKernel::run(const Case<double>&, std::vector<double>&, std::vector<double>*);

}  // namespace attncheck
