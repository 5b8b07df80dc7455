#include "attncheck/call_schema.hpp"

#include <cstring>
#include <utility>

namespace attncheck {

namespace {
// The byte offset of slot s's pointer in the ABI struct a call of `kind` holds it in, and that struct;
// -1 for a member the problem struct appended after the size its sender gave (an older checker's).
std::pair<char*, int> home(const AbiCall& call, CallKind kind, const Slot& s) {
  if (kind == CallKind::layer) return {reinterpret_cast<char*>(call.layer), s.abi.layer};
  if (s.abi.problem >= 0) {
    const bool covered = call.problem && call.problem->size >= int32_t(s.abi.problem + sizeof(void*));
    return {reinterpret_cast<char*>(call.problem), covered ? s.abi.problem : -1};
  }
  return {reinterpret_cast<char*>(call.grads), s.abi.grads};
}
}  // namespace

Dims dims_of(const Shape& s, int64_t D) {
  Dims dims;
  for (const auto& [dim, value] : {std::pair{Dim::B, s.B},
                                   {Dim::H, s.H},
                                   {Dim::H_kv, s.kv_heads()},
                                   {Dim::Tq, s.Tq},
                                   {Dim::Tk, s.Tk},
                                   {Dim::dk, s.dk},
                                   {Dim::dv, s.dv},
                                   {Dim::D, D},
                                   {Dim::NB, s.NB},
                                   {Dim::BS, s.BS},
                                   {Dim::BPS, s.BPS},
                                   {Dim::S, s.varlen ? s.B + 1 : 0}})
    dims[dim] = value;
  return dims;
}

void set_abi_pointer(const AbiCall& call, CallKind kind, const Slot& s, const void* data) {
  const auto [base, at] = home(call, kind, s);
  if (base && at >= 0) std::memcpy(base + at, &data, sizeof data);
}

const void* abi_pointer(const AbiCall& call, CallKind kind, const Slot& s) {
  const auto [base, at] = home(call, kind, s);
  const void* data = nullptr;
  if (base && at >= 0) std::memcpy(&data, base + at, sizeof data);
  return data;
}

}  // namespace attncheck
