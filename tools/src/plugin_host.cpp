#include "plugin_host.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "attncheck/abi.hpp"
#include "attncheck/fp_mode.hpp"
#include "attncheck/plugin_loader.hpp"
#include "attncheck/protocol.hpp"
#include "guard_pages.hpp"

namespace attncheck {
namespace {

using namespace protocol;
constexpr double kForever = std::numeric_limits<double>::infinity();

int g_answer_fd = -1;

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

// MODE before and after loading (the mode the library leaves is kept: it is what a program
// gets), then HELO, or FAIL with the loader's reason.
Plugin load_and_greet(const std::string& which, int answers) {
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
  return plugin;
}

void catch_faults() {
  struct sigaction action {};
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &action, nullptr);
  sigaction(SIGBUS, &action, nullptr);
}

// A PROB's headers, the frame's header `frame` read.
Request read_request(int requests, const FrameHeader& frame) {
  Request request{};
  ProblemHeader& r = request.header;
  if (!(frame.tag == kProblem) || read_all(requests, &r, sizeof r, kForever) != Io::ok) _exit(71);
  if ((r.flags & kDropout) && read_all(requests, &request.dropout, sizeof request.dropout, kForever) != Io::ok) _exit(71);
  if ((r.flags & kLayer) && read_all(requests, &request.layer, sizeof request.layer, kForever) != Io::ok) _exit(71);
  return request;
}

// A call's buffers, each between guards, in Buffer order (size 0: absent).
struct CallBuffers {
  size_t sizes[kBuffers];
  std::optional<Guarded> all[kBuffers];
  void* data(int b) const { return sizes[b] ? static_cast<void*>(all[b]->data) : nullptr; }
};

void place_buffers(const Request& request, bool at_start, CallBuffers& buffers) {
  buffer_sizes(request, buffers.sizes);
  for (int b = 0; b < kBuffers; ++b) buffers.all[b].emplace(buffers.sizes[b], at_start);
}

void read_inputs(int requests, const Request& request, CallBuffers& buffers) {
  for (int b = 0; b < kBuffers; ++b) {
    if (written(request, b)) continue;
    if (read_all(requests, buffers.all[b]->data, buffers.sizes[b], kForever) != Io::ok) _exit(0);
    buffers.all[b]->read_only();
  }
}

// Unwritten outputs read as NaN (a keep mask as kUnwrittenKeep).
void fill_outputs(const Request& request, CallBuffers& buffers) {
  const ProblemHeader& r = request.header;
  for (int b = 0; b < kBuffers; ++b) {
    if (!written(request, b)) continue;
    Guarded& buffer = *buffers.all[b];
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
}

// The problem as ABI v2 carries it (for the backward, its out and lse the given ones).
attncheck_problem_v2 problem_of(const Request& request, const CallBuffers& buffers) {
  const ProblemHeader& r = request.header;
  const DropoutHeader& dropout = request.dropout;
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
  v2.q = buffers.data(Q);
  v2.k = buffers.data(K);
  v2.v = buffers.data(V);
  v2.allow = static_cast<const uint8_t*>(buffers.data(ALLOW));
  v2.kv_lens = static_cast<const int32_t*>(buffers.data(KV_LENS));
  v2.bias = buffers.data(BIAS);
  v2.causal = r.causal;
  v2.window_left = r.window_left;
  v2.window_right = r.window_right;
  v2.scale = r.scale;
  v2.softcap = r.softcap;
  v2.out = buffers.data(OUT);
  v2.lse = buffers.data(LSE);
  v2.dropout_p = dropout.p;
  v2.dropout_seed = dropout.seed;
  v2.dropout_keep = static_cast<uint8_t*>(buffers.data(KEEP));
  return v2;
}

// The ABI view of a layer call's buffers (null when absent); x_kv is x_q for self-attention. Empty
// when the call is not a layer's.
attncheck_mha_v2 layer_of(const Request& request, const CallBuffers& buffers) {
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
  m.x_q = buffers.data(X_Q);
  m.x_kv = request.layer.parts & LayerHeader::kSelf ? m.x_q : buffers.data(X_KV);
  m.w_q = buffers.data(W_Q);
  m.w_k = buffers.data(W_K);
  m.w_v = buffers.data(W_V);
  m.b_q = buffers.data(B_Q);
  m.b_k = buffers.data(B_K);
  m.b_v = buffers.data(B_V);
  m.w_o = buffers.data(W_O);
  m.b_o = buffers.data(B_O);
  m.allow = static_cast<const uint8_t*>(buffers.data(ALLOW));
  m.kv_lens = static_cast<const int32_t*>(buffers.data(KV_LENS));
  m.causal = r.causal;
  m.window_left = r.window_left;
  m.window_right = r.window_right;
  m.scale = r.scale;
  m.out = buffers.data(OUT);
  m.weights = static_cast<float*>(buffers.data(WEIGHTS));
  return m;
}

// The plugin's status for the call, its buffers watched by the fault handler while it runs. A v1
// plugin gets its v1 view of the problem (key lengths folded into allow).
int32_t call_plugin(const Plugin& plugin, const Request& request, CallBuffers& buffers) {
  const ProblemHeader& r = request.header;
  const attncheck_problem_v2 v2 = problem_of(request, buffers);
  auto call_v1 = [&](auto zero) {
    using T = decltype(zero);
    std::vector<uint8_t> folded;
    const attncheck_problem v1 = to_abi(from_abi_v2<T>(v2), static_cast<T*>(v2.out), folded);
    return (r.dtype == ATTNCHECK_F64 ? plugin.forward_f64 : plugin.forward_f32)(&v1);
  };
  const attncheck_grads_v2 grads{&v2, buffers.data(DOUT), buffers.data(DQ), buffers.data(DK), buffers.data(DV)};
  const attncheck_mha_v2 layer = layer_of(request, buffers);
  for (int b = 0; b < kBuffers; ++b) watch_buffer(b, &*buffers.all[b], written(request, b));
  const bool backward = r.flags & kBackward;
  const int32_t status = r.flags & kLayer           ? (plugin.mha_v2 ? plugin.mha_v2(&layer) : 4)
                         : backward                 ? (plugin.backward_v2 ? plugin.backward_v2(&grads) : 4)
                         : plugin.version != 1      ? plugin.forward_v2(&v2)
                         : r.dtype == ATTNCHECK_F64 ? call_v1(0.0)
                                                    : call_v1(0.0f);
  unwatch_buffers();
  return status;
}

// MODE, STRY for the first written buffer whose canaries changed, then RSLT.
void answer(int answers, const Request& request, const CallBuffers& buffers, int32_t status) {
  send_mode(answers);
  for (int b = 0; b < kBuffers; ++b)
    if (const int damage = written(request, b) ? buffers.all[b]->damaged() : -1; damage >= 0) {
      const int32_t stray[2] = {b, damage};
      if (!write_frame(answers, kStray, stray, sizeof stray)) _exit(0);
      break;
    }
  const FrameHeader result{kResult, uint32_t(status == 0 ? result_payload(request) : sizeof status)};
  if (write_all(answers, &result, sizeof result, kForever) != Io::ok ||
      write_all(answers, &status, sizeof status, kForever) != Io::ok)
    _exit(0);
  for (int b = 0; b < kBuffers && status == 0; ++b)
    if (written(request, b) && write_all(answers, buffers.all[b]->data, buffers.sizes[b], kForever) != Io::ok) _exit(0);
}

}  // namespace

[[noreturn]] void host_plugin(const std::string& which, int requests, int answers) {
  g_answer_fd = answers;
  const Plugin plugin = load_and_greet(which, answers);
  catch_faults();
  FrameHeader frame;
  for (uint64_t call = 0; read_all(requests, &frame, sizeof frame, kForever) == Io::ok; ++call) {
    const Request request = read_request(requests, frame);
    CallBuffers buffers;
    place_buffers(request, call % 2 == 1, buffers);
    read_inputs(requests, request, buffers);
    fill_outputs(request, buffers);
    const int32_t status = call_plugin(plugin, request, buffers);
    answer(answers, request, buffers, status);
  }
  _exit(0);
}

}  // namespace attncheck
