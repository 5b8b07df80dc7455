#include "attncheck/protocol.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "attncheck/plugin.h"

namespace attncheck::protocol {

const char* const kBufferNames[kBuffers] = {"q", "k", "v", "allow", "kv_lens", "bias", "dout", "out", "keep", "lse", "dq", "dk", "dv"};

bool written(const ProblemHeader& p, int b) {
  if (p.flags & kBackward) return b >= DQ;
  return b == OUT || (b == LSE && (p.flags & kWantLse)) || (b == KEEP && (p.flags & kWantKeep));
}

void buffer_sizes(const ProblemHeader& p, size_t (&sizes)[kBuffers]) {
  // q, k, v, bias, out, dout and the gradients in the format (2 bytes for f16, bf16); lse in float
  // (double for f64); allow and keep one byte per element; kv_lens int32.
  const size_t e = p.dtype == ATTNCHECK_F64 ? 8 : p.dtype == ATTNCHECK_F32 ? 4 : 2;
  const size_t lse_e = p.dtype == ATTNCHECK_F64 ? 8 : 4;
  const size_t bh = size_t(p.B) * size_t(p.H), bkv = size_t(p.B) * size_t(p.H_kv), tq = size_t(p.Tq), tk = size_t(p.Tk);
  const bool backward = p.flags & kBackward;
  const size_t all[kBuffers] = {bh * tq * size_t(p.dk) * e,
                                bkv * tk * size_t(p.dk) * e,
                                bkv * tk * size_t(p.dv) * e,
                                (p.flags & kHasAllow) ? size_t(p.B) * tq * tk : 0,
                                (p.flags & kHasKvLens) ? size_t(p.B) * sizeof(int32_t) : 0,
                                (p.flags & kHasBias) ? bh * tq * tk * e : 0,
                                backward ? bh * tq * size_t(p.dv) * e : 0,
                                bh * tq * size_t(p.dv) * e,
                                (p.flags & kWantKeep) ? bh * tq * tk : 0,
                                (p.flags & (kWantLse | kBackward)) ? bh * tq * lse_e : 0,
                                backward ? bh * tq * size_t(p.dk) * e : 0,
                                backward ? bkv * tk * size_t(p.dk) * e : 0,
                                backward ? bkv * tk * size_t(p.dv) * e : 0};
  std::copy(std::begin(all), std::end(all), sizes);
}

namespace {
size_t payload(const ProblemHeader& p, bool writes) {
  size_t sizes[kBuffers], n = 0;
  buffer_sizes(p, sizes);
  for (int b = 0; b < kBuffers; ++b)
    if (written(p, b) == writes) n += sizes[b];
  return n;
}
}  // namespace

size_t problem_payload(const ProblemHeader& p) {
  return sizeof(ProblemHeader) + (p.flags & kDropout ? sizeof(DropoutHeader) : 0) + payload(p, false);
}
size_t result_payload(const ProblemHeader& p) { return sizeof(int32_t) + payload(p, true); }

namespace {
// Waits until fd is ready for `events` or the deadline passes (an infinite deadline never passes).
bool ready_within(int fd, short events, double deadline) {
  pollfd wait{fd, events, 0};
  int ready;
  do ready = poll(&wait, 1, std::isfinite(deadline) ? int(std::clamp(deadline - deadline_after(0), 0.0, 86400.0) * 1000) : -1);
  while (ready < 0 && errno == EINTR);
  return ready != 0;
}
}  // namespace

Io write_all(int fd, const void* data, size_t n, double deadline) {
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

Io read_all(int fd, void* data, size_t n, double deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    if (std::isfinite(deadline) && !ready_within(fd, POLLIN, deadline)) return Io::timed_out;
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
