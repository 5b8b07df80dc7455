#include "attncheck/protocol.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "attncheck/plugin.h"

namespace attncheck::protocol {

const char* const kBufferNames[kBuffers] = {"q",    "k",   "v",   "allow", "kv_lens", "bias", "dout", "out",
                                            "keep", "lse", "dq",  "dk",    "dv",      "x_q",  "x_kv", "w_q",
                                            "w_k",  "w_v", "b_q", "b_k",   "b_v",     "w_o",  "b_o",  "weights"};

bool written(const Request& r, int b) {
  const ProblemHeader& p = r.header;
  if (p.flags & kBackward) return b >= DQ && b <= DV;
  if (p.flags & kLayer) return b == OUT || (b == WEIGHTS && (p.flags & kWantWeights));
  return b == OUT || (b == LSE && (p.flags & kWantLse)) || (b == KEEP && (p.flags & kWantKeep));
}

namespace {
// A layer call's buffers: the masks, the ten inputs, out [B,Tq,D] and the weights [B,H,Tq,Tk] (f32, f64 for f64).
void layer_sizes(const Request& r, size_t e, size_t (&sizes)[kBuffers]) {
  const ProblemHeader& p = r.header;
  const LayerHeader& l = r.layer;
  const size_t B = size_t(p.B), D = size_t(l.D), tq = size_t(p.Tq), tk = size_t(p.Tk);
  const size_t q_width = size_t(p.H) * size_t(p.dk), k_width = size_t(p.H_kv) * size_t(p.dk),
               v_width = size_t(p.H_kv) * size_t(p.dv), merged = size_t(p.H) * size_t(p.dv);
  auto part = [&](uint32_t bit, size_t n) { return (l.parts & bit) ? n * e : 0; };
  std::fill(std::begin(sizes), std::end(sizes), 0);
  sizes[ALLOW] = (p.flags & kHasAllow) ? B * tq * tk : 0;
  sizes[KV_LENS] = (p.flags & kHasKvLens) ? B * sizeof(int32_t) : 0;
  sizes[X_Q] = B * tq * D * e;
  sizes[X_KV] = (l.parts & LayerHeader::kSelf) ? 0 : B * tk * D * e;
  sizes[W_Q] = D * q_width * e;
  sizes[W_K] = D * k_width * e;
  sizes[W_V] = D * v_width * e;
  sizes[B_Q] = part(LayerHeader::kBiasQ, q_width);
  sizes[B_K] = part(LayerHeader::kBiasK, k_width);
  sizes[B_V] = part(LayerHeader::kBiasV, v_width);
  sizes[W_O] = merged * D * e;
  sizes[B_O] = part(LayerHeader::kBiasO, D);
  sizes[OUT] = B * tq * D * e;
  sizes[WEIGHTS] = (p.flags & kWantWeights) ? B * size_t(p.H) * tq * tk * (p.dtype == ATTNCHECK_F64 ? 8 : 4) : 0;
}
}  // namespace

void buffer_sizes(const Request& r, size_t (&sizes)[kBuffers]) {
  const ProblemHeader& p = r.header;
  // q, k, v, bias, out, dout and the gradients in the format (2 bytes for f16, bf16); lse in float
  // (double for f64); allow and keep one byte per element; kv_lens int32.
  const size_t e = p.dtype == ATTNCHECK_F64 ? 8 : p.dtype == ATTNCHECK_F32 ? 4 : 2;
  const size_t lse_e = p.dtype == ATTNCHECK_F64 ? 8 : 4;
  if (p.flags & kLayer) return layer_sizes(r, e, sizes);
  const size_t bh = size_t(p.B) * size_t(p.H), bkv = size_t(p.B) * size_t(p.H_kv), tq = size_t(p.Tq), tk = size_t(p.Tk);
  const bool backward = p.flags & kBackward;
  const size_t all[DV + 1] = {bh * tq * size_t(p.dk) * e,
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
  std::fill(std::begin(sizes), std::end(sizes), 0);
  std::copy(std::begin(all), std::end(all), sizes);
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
  const uint32_t flags = r.header.flags;
  return sizeof(ProblemHeader) + (flags & kDropout ? sizeof(DropoutHeader) : 0) + (flags & kLayer ? sizeof(LayerHeader) : 0) +
         payload(r, false);
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
