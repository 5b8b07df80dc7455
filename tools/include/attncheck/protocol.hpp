// The child protocol (docs/protocol.md): how the checker talks to the process that runs the
// implementation, whether that is its own child hosting a plugin or any command (`check
// --impl-cmd`, the Python client). Frames over a pair of pipes: a 4-letter tag, the payload's
// length, the payload; every number little-endian, every tensor raw and contiguous.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "attncheck/call_schema.hpp"
#include "attncheck/domain.hpp"
#include "attncheck/features.hpp"

namespace attncheck::protocol {

static_assert(std::endian::native == std::endian::little, "the protocol's numbers are written as the machine holds them");

constexpr uint32_t kVersion = 1;

// The frames. Child to checker: HELO first (or FAIL: it cannot start), then for each PROB one RSLT,
// or FAIL (the call raised), or NTKN (the library's API cannot express this problem, which no
// restriction states: the Python client's NotExpressible; counted, never a finding). The plugin host alone also sends MODE (its
// floating-point mode), STRY (a stray write seen by canaries) and FALT (a fault, from its signal handler).
struct Tag {
  char name[4];
  bool operator==(const Tag&) const = default;
};
constexpr Tag kHello{{'H', 'E', 'L', 'O'}}, kProblem{{'P', 'R', 'O', 'B'}}, kResult{{'R', 'S', 'L', 'T'}},
    kFail{{'F', 'A', 'I', 'L'}}, kMode{{'M', 'O', 'D', 'E'}}, kStray{{'S', 'T', 'R', 'Y'}}, kFault{{'F', 'A', 'L', 'T'}},
    kNotTaken{{'N', 'T', 'K', 'N'}};

struct FrameHeader {
  Tag tag;
  uint32_t length;  // of the payload that follows
};
static_assert(sizeof(FrameHeader) == 8);

struct Hello {
  uint32_t protocol;      // kVersion
  uint32_t abi;           // the ABI whose view of a problem the implementation takes: 1 or 2
  uint32_t capabilities;  // ABI v2's ATTNCHECK_CAP_* bits
  // Appended: a HELO of the first 12 bytes alone takes every problem its claims allow.
  uint32_t restrictions;    // plugin.h's ATTNCHECK_ONLY_* bits (domain.hpp)
  attncheck_limits limits;  // with ATTNCHECK_ONLY_WITHIN_LIMITS
};
inline constexpr size_t kHelloWithoutDomain = 12;
static_assert(offsetof(Hello, restrictions) == kHelloWithoutDomain && sizeof(Hello) == 108, "the layout docs/protocol.md gives");

// The tensors a call carries: the call schema's slots (call_schema.hpp), in the order they follow
// a PROB (those it reads) and a RSLT (those it writes). A layer call reads ALLOW, KV_LENS and X_Q ..
// B_O, and writes LAYER_OUT [B,Tq,D] and WEIGHTS.
using Buffer = slot::Id;
using enum slot::Id;
inline constexpr int kBuffers = slot::kCount;

// The PROB flags: each the protocol_flag of its feature's row (features.hpp).
enum Flags : uint32_t {
  kHasAllow = protocol_flag(ATTNCHECK_CAP_ALLOW),
  kHasKvLens = protocol_flag(ATTNCHECK_CAP_KV_LENS),
  kHasBias = protocol_flag(ATTNCHECK_CAP_BIAS),
  kWantLse = protocol_flag(ATTNCHECK_CAP_LSE),
  kBackward = protocol_flag(ATTNCHECK_CAP_BACKWARD),
  kDropout = protocol_flag(ATTNCHECK_CAP_DROPOUT),          // a DropoutHeader follows the ProblemHeader
  kWantKeep = protocol_flag(ATTNCHECK_CAP_DROPOUT_MASK),    // the RSLT carries the keep mask after out
  kLayer = protocol_flag(ATTNCHECK_CAP_MHA),                // a layer call: a LayerHeader follows the ProblemHeader
  kWantWeights = protocol_flag(ATTNCHECK_CAP_MHA_WEIGHTS),  // and its RSLT carries each head's weights after out
  kPaged = protocol_flag(ATTNCHECK_CAP_PAGED_KV),           // a PagedHeader follows; k and v are pools, block_table after sinks
  kVarlen = protocol_flag(ATTNCHECK_CAP_VARLEN)  // the sequences packed (Tq, Tk their totals); cu_seqlens after the table
};

// A FALT's payload: where the faulting address lay among the call's buffers.
struct Fault {
  enum Where : int32_t { unknown = -1, before, past, read_only, outside };
  int32_t signal;
  int32_t buffer;  // Buffer: the one whose guard or pages it is in, or (outside) the nearest ending below; or -1
  Where where;     // unknown: the signal gave no address (a null pointer, a non-canonical one)
  int32_t unused;
  int64_t distance;  // bytes before the buffer's start (before) or past its end (past, outside)
  uint64_t address;
};
static_assert(sizeof(Fault) == 32);

// A PROB's first 64 bytes: the problem's fields as ABI v2 gives them.
struct ProblemHeader {
  int32_t dtype;  // ATTNCHECK_F32 .. ATTNCHECK_BF16
  uint32_t flags;
  int32_t B, H, H_kv, Tq, Tk, dk, dv;
  int32_t causal, window_left, window_right;
  double scale, softcap;
};
static_assert(sizeof(ProblemHeader) == 64 && offsetof(ProblemHeader, scale) == 48, "the layout docs/protocol.md gives");

// A PROB with kDropout: these 16 bytes right after its ProblemHeader, before the buffers.
struct DropoutHeader {
  double p;  // in (0, 1)
  uint64_t seed;
};
static_assert(sizeof(DropoutHeader) == 16);

// A PROB with kLayer: these 16 bytes right after its ProblemHeader, before the buffers.
struct LayerHeader {
  int32_t D;
  uint32_t parts;  // LayerPart bits (call_schema.hpp): kSelf, x_kv is x_q, not sent; each bias present
  uint64_t reserved;
};
static_assert(sizeof(LayerHeader) == 16);

// A PROB with kPaged: these 16 bytes after its other headers, before the buffers (contract.hpp's Shape).
struct PagedHeader {
  int32_t num_blocks, block_size, blocks_per_seq;  // NB, BS, BPS
  int32_t reserved;
};
static_assert(sizeof(PagedHeader) == 16);

// A PROB's headers: the ProblemHeader, then with kDropout the DropoutHeader, with kLayer the
// LayerHeader, with kPaged the PagedHeader.
struct Request {
  ProblemHeader header;
  DropoutHeader dropout;
  LayerHeader layer;
  PagedHeader paged;
};

// A PROB's headers in wire order, each with the flag that brings it (0: every PROB has it). The
// Python client's HEADERS are written from these (`attncheck features --python`).
struct HeaderRow {
  const char* name;
  size_t offset, size;  // in Request
  uint32_t flag;
};
inline constexpr HeaderRow kHeaders[] = {{"header", offsetof(Request, header), sizeof(ProblemHeader), 0},
                                         {"dropout", offsetof(Request, dropout), sizeof(DropoutHeader), kDropout},
                                         {"layer", offsetof(Request, layer), sizeof(LayerHeader), kLayer},
                                         {"paged", offsetof(Request, paged), sizeof(PagedHeader), kPaged}};

// f(bytes, size) for each header of r its flags carry, in wire order (the flags are read as each
// header comes, so f may be reading r's ProblemHeader in first).
template <class R, class F>
void for_each_header(R& r, F&& f) {
  using Byte = std::conditional_t<std::is_const_v<R>, const char, char>;
  for (const HeaderRow& h : kHeaders)
    if ((r.header.flags & h.flag) == h.flag) f(reinterpret_cast<Byte*>(&r) + h.offset, h.size);
}

// The byte an unwritten keep mask holds: neither 0 nor 1, so that a kernel that never writes it fails.
constexpr uint8_t kUnwrittenKeep = 0xFF;

// The kind of call a PROB asks for, the features its flags say it carries (capability bits), and
// its dims (D: a layer call's model width, else 1).
CallKind kind_of(const Request& r);
uint32_t features_of(const Request& r);
Dims dims_of(const Request& r);

// One call as ABI v2 holds it: the problem (the forward's, or the backward's forward), the
// backward's gradients, the layer's. Filled in place: grads.problem points at problem.
struct AbiStructs {
  attncheck_problem_v2 problem{};
  attncheck_grads_v2 grads{};
  attncheck_mha_v2 layer{};
  AbiCall call() { return {&problem, &grads, &layer}; }
};

// The ABI structs of request r (the plugin host's side), each buffer of `data` (null: absent) where
// ABI v2 holds it; a self-attention layer's x_kv is its x_q.
void abi_of(const Request& r, void* const (&data)[kBuffers], AbiStructs& abi);

// The request for the call `abi` holds (the checker's side), of `kind`, carrying `features`
// (capability bits, which give its flags) and, for a layer, `parts`; and its buffers where `abi`
// holds them, those it reads in `inputs`, those it writes in `outputs`.
Request request_of(AbiStructs& abi, CallKind kind, uint32_t features, uint32_t parts = 0);
void buffers_of(AbiStructs& abi, const Request& r, const void* (&inputs)[kBuffers], void* (&outputs)[kBuffers]);

// Whether a call writes buffer b: the forward out (and the keep mask and lse when asked); the
// backward dq, dk, dv; the layer out (and the weights when asked).
bool written(const Request& r, int b);
// Each buffer's bytes in a call (0: absent), in Buffer order.
void buffer_sizes(const Request& r, size_t (&sizes)[kBuffers]);
// The bytes a call reads (its headers and buffers), and a RSLT's payload when it succeeds (the status and what it writes).
size_t problem_payload(const Request& r);
size_t result_payload(const Request& r);

// I/O on a pipe; EINTR is retried. A deadline bounds a read or a write as a whole; a write is
// bounded only on a non-blocking fd (O_NONBLOCK), since a blocking write of more than the pipe holds
// waits for the reader whatever poll says.
enum class Io { ok, closed, timed_out };
// What ends a wait: the steady clock passing `at` (seconds from its epoch; infinity: never), or
// `give_up` returning true, asked every tenth of a second of waiting (a child judged by its work).
struct Deadline {
  Deadline(double at = std::numeric_limits<double>::infinity(), std::function<bool()> give_up = {})
      : at(at), give_up(std::move(give_up)) {}
  double at;
  std::function<bool()> give_up;
};
// A stop the whole process asks for (a signal handler's: SIGINT, SIGTERM): every wait on a pipe
// ends as timed out from then on, and the checker starts no call (IsolatedKernel). Signal-safe.
void request_stop();
bool stop_requested();
Io write_all(int fd, const void* data, size_t n, const Deadline& deadline);
Io read_all(int fd, void* data, size_t n, const Deadline& deadline);
double deadline_after(double seconds);
bool write_frame(int fd, Tag tag, const void* payload, size_t n);

// Bytes as a person reads them: printable ASCII quoted, then the bytes in hex.
std::string show_bytes(const void* data, size_t n);

}  // namespace attncheck::protocol
