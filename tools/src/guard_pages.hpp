// The plugin host's guarded buffers (guard pages and canary bytes around each buffer of a call), and
// where a faulting address lies among them.
#pragma once

#include <signal.h>

#include <cstddef>
#include <cstdint>

#include "attncheck/protocol.hpp"

namespace attncheck {

// n bytes between two guard regions (PROT_NONE, kGuard bytes each), 64-byte aligned and flush with
// the trailing guard (or, at_start, with the leading one), canary bytes in the slack of its pages.
// Calls alternate the two placements, so that reads past either end meet a guard in one call or the
// other. A guard is wide enough that an overrun by a stride lands in the buffer's own guard, so a
// fault there is the buffer's. An absent buffer (n 0) is not mapped: no fault can name it.
struct Guarded {
  uint8_t *base = nullptr, *pages = nullptr, *data = nullptr;
  size_t data_pages_bytes = 0, n = 0;
  Guarded(size_t bytes, bool at_start);
  ~Guarded();
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
  void read_only();
  // Which canary slack was written: 0 before the data, 1 after it, -1 none.
  int damaged() const;
};

// The current call's buffers and which it writes, for the fault handler (set before the call,
// read in a signal): buffer b is `buffer`, written or not.
void watch_buffer(int b, Guarded* buffer, bool written);
// No call is running: a fault names no buffer.
void unwatch_buffers();

// Where a faulting address lies among the call's buffers (async-signal-safe: arithmetic alone).
protocol::Fault locate(int signal, const siginfo_t& info);

}  // namespace attncheck
