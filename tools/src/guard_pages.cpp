#include "guard_pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace attncheck {
namespace {

using namespace protocol;
constexpr uint8_t kCanary = 0xA5;           // in the slack of a buffer's pages
constexpr size_t kGuard = size_t(1) << 20;  // bytes of each guard region

// The buffers watch_buffer names, read in a signal (locate).
Guarded* volatile g_buffers[kBuffers];
volatile bool g_written[kBuffers];

}  // namespace

Guarded::Guarded(size_t bytes, bool at_start) : n(bytes) {
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

Guarded::~Guarded() {
  if (base) munmap(base, data_pages_bytes + 2 * kGuard);
}

void Guarded::read_only() {
  if (n) mprotect(pages, data_pages_bytes, PROT_READ);
}

int Guarded::damaged() const {
  for (const uint8_t* p = pages; p < data; ++p)
    if (*p != kCanary) return 0;
  for (const uint8_t* p = data + n; p < pages + data_pages_bytes; ++p)
    if (*p != kCanary) return 1;
  return -1;
}

void watch_buffer(int b, Guarded* buffer, bool written) {
  g_buffers[b] = buffer;
  g_written[b] = written;
}

void unwatch_buffers() {
  for (int b = 0; b < kBuffers; ++b) g_buffers[b] = nullptr;
}

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

}  // namespace attncheck
