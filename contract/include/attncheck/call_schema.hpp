// The call schema: every tensor a kernel call carries is one slot, one row of call_slots.def, with
// its name, shape in the shape vocabulary, element rule, the feature that brings it, its role in
// each kind of call, and where ABI v2 and the C++ problem hold it. The protocol's buffers, the
// plugin host's fill of the ABI, the conversions between Problem, Case and the ABI, the case
// text's tensors, the shrinker's clears, the reports' names and the Python client's table all
// walk this table: a new input is a row here, its member in plugin.h, Problem and Case.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include "attncheck/contract.hpp"
#include "attncheck/plugin.h"
#include "attncheck/precision.hpp"

namespace attncheck {

// The dims of the shape vocabulary (contract.hpp's Shape, and D, a layer's model width; NB, BS and
// BPS a paged call's pools and block table: num_blocks, block_size, blocks_per_seq; S a varlen call's
// cu_seqlens entries, B + 1).
enum class Dim : uint8_t { B, H, H_kv, Tq, Tk, dk, dv, D, NB, BS, BPS, S };
inline constexpr int kDims = 12;
inline constexpr const char* kDimNames[kDims] = {"B", "H", "H_kv", "Tq", "Tk", "dk", "dv", "D", "NB", "BS", "BPS", "S"};

// A slot's shape: the dims whose product is its element count, row-major.
struct Extent {
  Dim dims[4] = {};
  int rank = 0;
  template <class... D>
  constexpr Extent(D... d) : dims{d...}, rank(int(sizeof...(d))) {}
};

// A call's value of each dim.
struct Dims {
  int64_t of[kDims] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};  // dense: no blocks, no packed sequences
  constexpr int64_t operator[](Dim d) const { return of[int(d)]; }
  constexpr int64_t& operator[](Dim d) { return of[int(d)]; }
};
// Those of an attention shape (H_kv its KV heads) and a layer's model width.
Dims dims_of(const Shape& shape, int64_t D = 1);

// What a slot's elements are: in the call's format (2 bytes for f16 and bf16), wide (float, double
// for f64: the log-sum-exp and the layer's weights), f32 (float in every format), int32, or a byte
// (0 or 1 for a mask).
enum class Element : uint8_t { format, wide, f32, int32, byte };

// Its part in one kind of call: absent, read, written; the _if ones only when the call carries the
// slot's feature (its protocol flag) or, for a layer bias, its part; in_unless read unless the call
// carries the part (x_kv, which self-attention leaves out).
enum class Role : uint8_t { none, in, out, in_if, out_if, in_unless };
enum class CallKind : uint8_t { forward, backward, layer };

// A layer call's parts (the protocol's LayerHeader::parts).
enum LayerPart : uint32_t { kSelf = 1, kBiasQ = 2, kBiasK = 4, kBiasV = 8, kBiasO = 16 };

// Where ABI v2 holds a slot: its byte offset in attncheck_problem_v2, attncheck_grads_v2 and
// attncheck_mha_v2, -1 where it is not.
struct AbiAt {
  int16_t problem = -1, grads = -1, layer = -1;
  const char* member = nullptr;  // its name there (the same in each struct that has it)
};

struct Slot {
  const char* id;    // "KV_LENS": its enumerator
  const char* name;  // "kv_lens": what the protocol, the reports and the Python client call it
  Extent shape;
  Extent pooled;  // its shape in a paged call (K's and V's pools), rank 0 where that is `shape`
  Extent packed;  // its shape in a varlen call (the sequences packed), rank 0 where that is `shape`
  Element element;
  uint32_t feature;  // the capability bit that brings it (0: none)
  Role roles[3];     // in CallKind order: forward, backward, layer
  uint32_t part;     // a LayerPart (0: none)
  AbiAt abi;
  bool input;  // a forward input held by Problem and Case (INPUT)

  constexpr Role role(CallKind kind) const { return roles[int(kind)]; }
};

// The slots' enumerators, in wire order: slot::Q .. slot::WEIGHTS, slot::kCount.
namespace slot {
enum Id : int {
#define ATTNCHECK_SLOT(id, ...) id,
#include "attncheck/call_slots.def"
#undef ATTNCHECK_SLOT
  kCount
};
}  // namespace slot

namespace slot_rows {
using enum Dim;  // the rows' shapes
inline constexpr Slot kRows[slot::kCount] = {
#define IN_PROBLEM(m) \
  AbiAt { int16_t(offsetof(attncheck_problem_v2, m)), -1, -1, #m }
#define IN_GRADS(m) \
  AbiAt { -1, int16_t(offsetof(attncheck_grads_v2, m)), -1, #m }
#define IN_LAYER(m) \
  AbiAt { -1, -1, int16_t(offsetof(attncheck_mha_v2, m)), #m }
#define IN_PROBLEM_AND_LAYER(m) \
  AbiAt { int16_t(offsetof(attncheck_problem_v2, m)), -1, int16_t(offsetof(attncheck_mha_v2, m)), #m }
#define INPUT(in_problem, in_case) true
#define LAYER_INPUT(in_layer) false
#define NOT_AN_INPUT false
#define ATTNCHECK_SLOT(id, name, shape, pooled, packed, element, feature, forward, backward, layer, part, abi, members) \
  Slot{#id,           name,                                                                                             \
       Extent shape,  Extent pooled,                                                                                    \
       Extent packed, Element::element,                                                                                 \
       feature,       {Role::forward, Role::backward, Role::layer},                                                     \
       part,          abi,                                                                                              \
       members},
#include "attncheck/call_slots.def"
#undef ATTNCHECK_SLOT
#undef IN_PROBLEM
#undef IN_GRADS
#undef IN_LAYER
#undef IN_PROBLEM_AND_LAYER
#undef INPUT
#undef LAYER_INPUT
#undef NOT_AN_INPUT
};
}  // namespace slot_rows

// The table, in wire order.
inline constexpr std::span<const Slot, slot::kCount> kSlots = slot_rows::kRows;

// Slot s's place in the table: its slot::Id, the index of what is kept per slot.
inline int index_of(const Slot& s) { return int(&s - kSlots.data()); }

// Slot s's shape in a call of dims `dims`: its pooled one in a paged call (BS > 0), its packed one in a
// varlen call (S > 0), where it has one.
constexpr const Extent& extent_in(const Slot& s, const Dims& dims) {
  if (dims[Dim::BS] > 0 && s.pooled.rank) return s.pooled;
  return dims[Dim::S] > 0 && s.packed.rank ? s.packed : s.shape;
}

// The elements of slot s in a call of dims `dims`.
constexpr int64_t elements(const Slot& s, const Dims& dims) {
  const Extent& e = extent_in(s, dims);
  int64_t n = 1;
  for (int d = 0; d < e.rank; ++d) n *= dims[e.dims[d]];
  return n;
}

// The format a floating slot's elements are stored in, in a call in `format`: the call's own, float
// (f32), or float and double for f64 (wide). Not for int32 and byte slots.
constexpr Format stored_format(const Slot& s, Format format) {
  if (s.element == Element::f32) return Format::f32;
  if (s.element == Element::wide) return format == Format::f64 ? Format::f64 : Format::f32;
  return format;
}

// The bytes of one element of slot s in a call in `format`.
constexpr size_t element_bytes(const Slot& s, Format format) {
  switch (s.element) {
    case Element::format:
      return format == Format::f64 ? 8 : format == Format::f32 ? 4 : 2;
    case Element::wide:
      return format == Format::f64 ? 8 : 4;
    case Element::f32:
    case Element::int32:
      return 4;
    case Element::byte:
      return 1;
  }
  return 0;
}

// Whether a call of `kind` carries slot s, given the features its flags say it carries
// (capability bits) and, for a layer call, its parts.
constexpr bool carried(const Slot& s, CallKind kind, uint32_t features, uint32_t parts = 0) {
  const bool brought = s.part ? (parts & s.part) != 0 : (features & s.feature) != 0;
  switch (s.role(kind)) {
    case Role::none:
      return false;
    case Role::in:
    case Role::out:
      return true;
    case Role::in_if:
    case Role::out_if:
      return brought;
    case Role::in_unless:
      return !(parts & s.part);
  }
  return false;
}

// Whether a call of `kind` writes slot s (when it carries it).
constexpr bool writes(const Slot& s, CallKind kind) { return s.role(kind) == Role::out || s.role(kind) == Role::out_if; }

// The slot named `name` among those a call of `kind` may carry; null for none.
constexpr const Slot* slot_named(std::string_view name, CallKind kind) {
  for (const Slot& s : kSlots)
    if (name == s.name && s.role(kind) != Role::none) return &s;
  return nullptr;
}

// The ABI v2 structs of one call: the problem (forward, and the backward's forward), the backward's
// gradients, the layer's.
struct AbiCall {
  attncheck_problem_v2* problem = nullptr;
  attncheck_grads_v2* grads = nullptr;
  attncheck_mha_v2* layer = nullptr;
};

// Slot s's pointer in the ABI structs of a call of `kind` set to `data` (as every ABI pointer is a
// data pointer, set by its bytes); nothing when the ABI has no place for it there.
void set_abi_pointer(const AbiCall& call, CallKind kind, const Slot& s, const void* data);
// And read back (null when the ABI has no place for it).
const void* abi_pointer(const AbiCall& call, CallKind kind, const Slot& s);

// f(slot, in_problem, in_case) for each input row (INPUT), in_problem and in_case its
// accessors: in_problem(problem) the member of a Problem<T> (q, k, v, masks.allow,
// masks.key_lengths, bias) and in_case(owned) the buffer of a Case<T> (q, k, v, allow, key_lengths,
// bias); and f(slot, in_layer) for each layer input row (LAYER_INPUT), in_layer(layer) the member
// of a Layer<T> or LayerCase<T>. The one place a row's members are named.
template <class F, class G>
void for_each_input_row(F&& f, G&& g) {
#define INPUT(in_problem, in_case)                                            \
  f(                                                                          \
      slot, [](auto& p) -> decltype((p.in_problem)) { return p.in_problem; }, \
      [](auto& c) -> decltype((c.in_case)) { return c.in_case; });
#define LAYER_INPUT(in_layer) g(slot, [](auto& l) -> decltype((l.in_layer)) { return l.in_layer; });
#define NOT_AN_INPUT
#define ATTNCHECK_SLOT(id, name, shape, pooled, packed, element, feature, forward, backward, layer, part, abi, members) \
  {                                                                                                                     \
    [[maybe_unused]] const Slot& slot = kSlots[slot::id];                                                               \
    members                                                                                                             \
  }
#include "attncheck/call_slots.def"
#undef ATTNCHECK_SLOT
#undef INPUT
#undef LAYER_INPUT
#undef NOT_AN_INPUT
}

// f(slot, member) for each forward input of a Problem<T> (or anything with its members).
template <class P, class F>
void for_each_problem_input(P& problem, F&& f) {
  for_each_input_row([&](const Slot& s, auto in_problem, auto) { f(s, in_problem(problem)); }, [](const Slot&, auto) {});
}

// f(slot, buffer) for each forward input of a Case<T>.
template <class C, class F>
void for_each_case_input(C& owned, F&& f) {
  for_each_input_row([&](const Slot& s, auto, auto in_case) { f(s, in_case(owned)); }, [](const Slot&, auto) {});
}

// Whether accessor `M` (a row's) names a member of an X.
template <class M, class X>
inline constexpr bool has_member = std::is_invocable_v<M, X&>;

// f(slot, member, buffer) for each attention input `problem` has a member for: its member there and
// its buffer in owned (a Problem's and a Case's; a Layer's masks and a LayerCase's).
template <class P, class C, class F>
void for_each_input(P& problem, C& owned, F&& f) {
  for_each_input_row(
      [&](const Slot& s, auto in_problem, auto in_case) {
        if constexpr (has_member<decltype(in_problem), P>) f(s, in_problem(problem), in_case(owned));
      },
      [](const Slot&, auto) {});
}

// f(slot, member) for each attention input a Layer<T> carries too (its masks).
template <class L, class F>
void for_each_layer_mask(L& layer, F&& f) {
  for_each_input_row(
      [&](const Slot& s, auto in_problem, auto) {
        if constexpr (has_member<decltype(in_problem), L>) f(s, in_problem(layer));
      },
      [](const Slot&, auto) {});
}

// f(slot, member) for each layer input of a Layer<T> or a LayerCase<T>.
template <class L, class F>
void for_each_layer_input(L& owned, F&& f) {
  for_each_input_row([](const Slot&, auto, auto) {}, [&](const Slot& s, auto in_layer) { f(s, in_layer(owned)); });
}

}  // namespace attncheck
