#include "attncheck/protocol.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "attncheck/call_scalars.hpp"
#include "attncheck/plugin.h"

namespace attncheck::protocol {

CallKind kind_of(const Request& r) {
  return r.header.flags & kLayer ? CallKind::layer : r.header.flags & kBackward ? CallKind::backward : CallKind::forward;
}

uint32_t features_of(const Request& r) {
  uint32_t carried = 0;
  for (const Feature& f : features())
    if (f.protocol_flag & r.header.flags) carried |= f.capability;
  return carried;
}

Dims dims_of(const Request& r) {
  const ProblemHeader& p = r.header;
  Shape s{p.B, p.H, p.Tq, p.Tk, p.dk, p.dv, p.H_kv};
  if (r.header.flags & kPaged) s.NB = r.paged.num_blocks, s.BS = r.paged.block_size, s.BPS = r.paged.blocks_per_seq;
  s.varlen = (r.header.flags & kVarlen) != 0;
  return attncheck::dims_of(s, kind_of(r) == CallKind::layer ? r.layer.D : 1);
}

namespace {
bool carries(const Request& r, int b) { return carried(kSlots[b], kind_of(r), features_of(r), r.layer.parts); }
}  // namespace

bool written(const Request& r, int b) { return carries(r, b) && writes(kSlots[b], kind_of(r)); }

void buffer_sizes(const Request& r, size_t (&sizes)[kBuffers]) {
  // Each carried slot's elements times its element's bytes in the call's format (negative dims,
  // which a checked header never has, count as 0).
  const Dims dims = dims_of(r);
  for (int b = 0; b < kBuffers; ++b)
    sizes[b] = carries(r, b)
                   ? size_t(std::max<int64_t>(0, elements(kSlots[b], dims))) * element_bytes(kSlots[b], Format(r.header.dtype))
                   : 0;
}

namespace {

// Each scalar of a PROB's headers copied to ABI struct a (a problem's or a layer's: those it has
// a member for, call_scalars.def), or back.
enum class Way { to_abi, to_request };
template <class A>
void copy_scalars(Request& r, A& a, Way way) {
  for_each_sent_row([&](auto in_abi, auto in_request) {
    if constexpr (has_member<decltype(in_abi), A>) {
      if (way == Way::to_abi)
        assign(in_abi(a), in_request(r));
      else
        assign(in_request(r), in_abi(a));
    }
  });
}

}  // namespace

void abi_of(const Request& r, void* const (&data)[kBuffers], AbiStructs& abi) {
  Request scalars = r;
  abi.problem = {};
  abi.problem.size = int32_t(sizeof abi.problem);
  copy_scalars(scalars, abi.problem, Way::to_abi);
  abi.grads = {};
  abi.grads.problem = &abi.problem;
  abi.layer = {};
  if (kind_of(r) == CallKind::layer) {
    abi.layer.size = int32_t(sizeof abi.layer);
    copy_scalars(scalars, abi.layer, Way::to_abi);
  }
  for (int b = 0; b < kBuffers; ++b) set_abi_pointer(abi.call(), kind_of(r), kSlots[b], data[b]);
  if (r.layer.parts & kSelf) abi.layer.x_kv = abi.layer.x_q;
}

Request request_of(AbiStructs& abi, CallKind kind, uint32_t features, uint32_t parts) {
  Request r{};
  const bool layer = kind == CallKind::layer;
  if (layer)
    copy_scalars(r, abi.layer, Way::to_request);
  else
    copy_scalars(r, abi.problem, Way::to_request);
  for (const Feature& f : attncheck::features())
    if (f.capability & features) r.header.flags |= f.protocol_flag;
  if (layer) r.layer.parts = parts;
  return r;
}

void buffers_of(AbiStructs& abi, const Request& r, const void* (&inputs)[kBuffers], void* (&outputs)[kBuffers]) {
  for (int b = 0; b < kBuffers; ++b) {
    const void* data = carries(r, b) ? abi_pointer(abi.call(), kind_of(r), kSlots[b]) : nullptr;
    inputs[b] = written(r, b) ? nullptr : data;
    outputs[b] = written(r, b) ? const_cast<void*>(data) : nullptr;
  }
}

namespace {
size_t payload(const Request& r, bool writes) {
  size_t sizes[kBuffers], n = 0;
  buffer_sizes(r, sizes);
  for (int b = 0; b < kBuffers; ++b)
    if (written(r, b) == writes) n += sizes[b];
  return n;
}
}  // namespace

size_t problem_payload(const Request& r) {
  size_t headers = 0;
  for_each_header(r, [&](const char*, size_t size) { headers += size; });
  return headers + payload(r, false);
}
size_t result_payload(const Request& r) { return sizeof(int32_t) + payload(r, true); }

namespace {
std::atomic<bool> stop_asked{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");
}  // namespace

void request_stop() { stop_asked = true; }
bool stop_requested() { return stop_asked; }

namespace {
// Waits until fd is ready for `events` or the deadline (or a stop asked for) ends the wait.
bool ready_within(int fd, short events, const Deadline& deadline) {
  pollfd wait{fd, events, 0};
  for (;;) {
    const double left = deadline.at - deadline_after(0);
    if (left <= 0 || stop_requested()) return false;
    const int slice = deadline.give_up      ? std::min(100, int(left * 1000) + 1)
                      : std::isfinite(left) ? int(std::min(left, 86400.0) * 1000) + 1
                                            : -1;
    const int ready = poll(&wait, 1, slice);
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return true;  // the read or write that follows says what is wrong
    if (deadline.give_up && deadline.give_up()) return false;
  }
}
}  // namespace

Io write_all(int fd, const void* data, size_t n, const Deadline& deadline) {
  auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {  // a non-blocking pipe that is full: the reader is behind
      if (!ready_within(fd, POLLOUT, deadline)) return Io::timed_out;
      continue;
    }
    if (w <= 0) return Io::closed;
    p += w;
    n -= size_t(w);
  }
  return Io::ok;
}

double deadline_after(double seconds) {
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return now + seconds;
}

Io read_all(int fd, void* data, size_t n, const Deadline& deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    if ((std::isfinite(deadline.at) || deadline.give_up) && !ready_within(fd, POLLIN, deadline)) return Io::timed_out;
    const ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return Io::closed;
    p += r;
    n -= size_t(r);
  }
  return Io::ok;
}

bool write_frame(int fd, Tag tag, const void* payload, size_t n) {
  const FrameHeader header{tag, uint32_t(n)};
  const double forever = std::numeric_limits<double>::infinity();
  return write_all(fd, &header, sizeof header, forever) == Io::ok && write_all(fd, payload, n, forever) == Io::ok;
}

std::string show_bytes(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  std::string text = "'", hex;
  for (size_t i = 0; i < n; ++i) {
    text += p[i] >= 32 && p[i] < 127 ? char(p[i]) : '.';
    char byte[4];
    std::snprintf(byte, sizeof byte, "%s%02x", i ? " " : "", p[i]);
    hex += byte;
  }
  return text + "' (" + hex + ")";
}

}  // namespace attncheck::protocol
