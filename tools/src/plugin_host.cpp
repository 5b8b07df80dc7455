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
  bool read = frame.tag == kProblem;
  for_each_header(request,
                  [&](char* header, size_t size) { read = read && read_all(requests, header, size, kForever) == Io::ok; });
  if (!read) _exit(71);
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

// Unwritten outputs read as NaN (a byte slot, the keep mask, as kUnwrittenKeep).
void fill_outputs(const Request& request, CallBuffers& buffers) {
  const Format format = Format(request.header.dtype);
  for (int b = 0; b < kBuffers; ++b) {
    if (!written(request, b)) continue;
    Guarded& buffer = *buffers.all[b];
    if (kSlots[b].element == Element::byte) {
      std::memset(buffer.data, kUnwrittenKeep, buffer.n);
      continue;
    }
    visit_format(stored_format(kSlots[b], format), [&](auto zero) {
      using F = decltype(zero);
      const auto nan = Precision<F>::to_bits(Precision<F>::from_double(std::numeric_limits<double>::quiet_NaN()));
      for (size_t n = 0; n < buffer.n; n += sizeof nan) std::memcpy(buffer.data + n, &nan, sizeof nan);
    });
  }
}

// The plugin's status for the call, its buffers watched by the fault handler while it runs. A v1
// plugin gets its v1 view of the problem (key lengths folded into allow).
int32_t call_plugin(const Plugin& plugin, const Request& request, CallBuffers& buffers) {
  const ProblemHeader& r = request.header;
  void* data[kBuffers];
  for (int b = 0; b < kBuffers; ++b) data[b] = buffers.data(b);
  AbiStructs abi;
  abi_of(request, data, abi);
  auto call_v1 = [&](auto zero) {
    using T = decltype(zero);
    std::vector<uint8_t> folded;
    const attncheck_problem v1 = to_abi(from_abi_v2<T>(abi.problem), static_cast<T*>(abi.problem.out), folded);
    return (r.dtype == ATTNCHECK_F64 ? plugin.forward_f64 : plugin.forward_f32)(&v1);
  };
  for (int b = 0; b < kBuffers; ++b) watch_buffer(b, &*buffers.all[b], written(request, b));
  const int32_t status = kind_of(request) == CallKind::layer      ? (plugin.mha_v2 ? plugin.mha_v2(&abi.layer) : 4)
                         : kind_of(request) == CallKind::backward ? (plugin.backward_v2 ? plugin.backward_v2(&abi.grads) : 4)
                         : plugin.version != 1                    ? plugin.forward_v2(&abi.problem)
                         : r.dtype == ATTNCHECK_F64               ? call_v1(0.0)
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
