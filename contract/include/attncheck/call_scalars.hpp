// The call schema's scalars: the dims and the numbers a kernel call carries beside its tensors, one
// row each of call_scalars.def. Every copy of them between the C++ problem (Problem, Layer), a case
// (Case, LayerCase), the ABI structs and the protocol's headers walks these rows: a struct takes
// the rows whose member it has, so that a new scalar is a row there and a member where it is held.
#pragma once

#include <cstddef>
#include <type_traits>

#include "attncheck/call_schema.hpp"
#include "attncheck/layer.hpp"

namespace attncheck {

// to = from, converted (the ABI's int32_t to Causal, Format or int64_t, and back).
template <class To, class From>
void assign(To& to, const From& from) {
  to = static_cast<To>(from);
}

// Those of a layer's shape; and a shape set from dims (H_kv 0: as many as H; S > 0: varlen).
inline Dims dims_of(const LayerShape& s) { return dims_of(s.heads, s.D); }
inline void set_dims(Shape& s, const Dims& d) {
  s = {d[Dim::B],    d[Dim::H],  d[Dim::Tq], d[Dim::Tk],  d[Dim::dk],   d[Dim::dv],
       d[Dim::H_kv], d[Dim::NB], d[Dim::BS], d[Dim::BPS], d[Dim::S] > 0};
}
inline void set_dims(LayerShape& s, const Dims& d) {
  set_dims(s.heads, d);
  s.D = d[Dim::D];
}

// Whether ABI struct a holds `member`: always, but for a struct with a size (v2's), only when the
// size covers it (a member appended after the caller was built is not there).
template <class A, class M>
bool covers(const A& a, const M& member) {
  if constexpr (requires { a.size; })
    return size_t(reinterpret_cast<const char*>(&member) - reinterpret_cast<const char*>(&a)) + sizeof member <= size_t(a.size);
  else
    return true;
}

// A dim's member name in the ABI structs (a repro's source sets it by name).
constexpr const char* abi_member(Dim d) {
#define ATTNCHECK_DIM(dim, abi, request) \
  if (d == Dim::dim) return #abi;
#define ATTNCHECK_SCALAR(problem, case_, feature, sent, text)
#include "attncheck/call_scalars.def"
#undef ATTNCHECK_DIM
#undef ATTNCHECK_SCALAR
  return nullptr;
}

// f(dim, in_abi, in_request) for each dim row: in_abi(a) its member in an ABI struct that has one
// (has_member), in_request(r) its member in the protocol's Request.
template <class F>
void for_each_dim_row(F&& f) {
#define ATTNCHECK_DIM(dim, abi, request) \
  f(                                     \
      Dim::dim, [](auto& a) -> decltype((a.abi)) { return a.abi; }, [](auto& r) -> decltype((r.request)) { return r.request; });
#define ATTNCHECK_SCALAR(problem, case_, feature, sent, text)
#include "attncheck/call_scalars.def"
#undef ATTNCHECK_DIM
#undef ATTNCHECK_SCALAR
}

// A scalar row's feature (the capability bit that brings it, 0 for none) and where a case text
// holds it (call_scalars.def's text column).
struct ScalarRow {
  uint32_t feature = 0;
  enum Text : uint8_t { not_in_text, option, option_unless_default, on_line, also_on_line } text = not_in_text;
  const char* key = nullptr;         // an option's
  const char* name = nullptr;        // its Case member's name (the protocol's field in the Python client)
  const char* abi_member = nullptr;  // its member's name in the ABI structs (a SENT row's)
  bool on_a_line() const { return text == on_line || text == also_on_line; }
  bool an_option() const { return text == option || text == option_unless_default; }
};

// f(in_problem, in_case, in_abi, in_request, row) for each scalar row, the first four accessors
// of the row's member in a Problem or Layer, a Case or LayerCase, an ABI struct, the protocol's
// Request (a NOT_SENT row's in_abi and in_request name no member of anything), `row` its ScalarRow.
struct NotSent {};
template <class F>
void for_each_scalar_row(F&& f) {
#define SENT(abi, request) \
  [](auto& a) -> decltype((a.abi)) { return a.abi; }, [](auto& r) -> decltype((r.request)) { return r.request; }
#define NOT_SENT [](NotSent) {}, [](NotSent) {}
#define OPTION(key) ScalarRow::option, key
#define OPTION_UNLESS_DEFAULT(key) ScalarRow::option_unless_default, key
#define ON_LINE ScalarRow::on_line, nullptr
#define ALSO_ON_LINE ScalarRow::also_on_line, nullptr
#define NOT_IN_TEXT ScalarRow::not_in_text, nullptr
#define ATTNCHECK_DIM(dim, abi, request)
#define ATTNCHECK_ABI_NAME_SENT(abi, request) #abi
#define ATTNCHECK_ABI_NAME_NOT_SENT nullptr
#define ATTNCHECK_SCALAR(problem, case_, feature, sent, text)                                                                 \
  f([](auto& p) -> decltype((p.problem)) { return p.problem; }, [](auto& c) -> decltype((c.case_)) { return c.case_; }, sent, \
    ScalarRow{feature, text, #case_, ATTNCHECK_ABI_NAME_##sent});
#include "attncheck/call_scalars.def"
#undef ATTNCHECK_DIM
#undef ATTNCHECK_SCALAR
#undef SENT
#undef NOT_SENT
#undef OPTION
#undef OPTION_UNLESS_DEFAULT
#undef ON_LINE
#undef ALSO_ON_LINE
#undef NOT_IN_TEXT
#undef ATTNCHECK_ABI_NAME_SENT
#undef ATTNCHECK_ABI_NAME_NOT_SENT
}

// f(in_abi, in_request) for each dim and each sent scalar: what an ABI struct and the protocol's
// headers both hold.
template <class F>
void for_each_sent_row(F&& f) {
  for_each_dim_row([&](Dim, auto in_abi, auto in_request) { f(in_abi, in_request); });
  for_each_scalar_row([&](auto, auto, auto in_abi, auto in_request, ScalarRow) { f(in_abi, in_request); });
}

// ABI struct a's scalars (v1's, v2's or the layer's: each row it has a member for) from p, a
// Problem<T> or Layer<T>.
template <class P, class A>
void scalars_to_abi(const P& p, A& a) {
  const Dims dims = dims_of(p.shape);
  for_each_dim_row([&](Dim d, auto in_abi, auto) {
    if constexpr (has_member<decltype(in_abi), A>) assign(in_abi(a), dims[d]);
  });
  for_each_scalar_row([&](auto in_problem, auto, auto in_abi, auto, ScalarRow) {
    if constexpr (has_member<decltype(in_abi), A> && has_member<decltype(in_problem), const P>) assign(in_abi(a), in_problem(p));
  });
}

// p's shape and scalars from ABI struct a, those its size covers. Not its format: p's buffers are
// T's until widened, and widening sets the call's (widen_inputs, abi.hpp).
template <class A, class P>
void scalars_from_abi(const A& a, P& p) {
  Dims dims;
  dims[Dim::H_kv] = 0;  // ABI v1 has no kv_heads: as many as H
  for_each_dim_row([&](Dim d, auto in_abi, auto) {
    if constexpr (has_member<decltype(in_abi), const A>)
      if (covers(a, in_abi(a))) dims[d] = in_abi(a);
  });
  set_dims(p.shape, dims);
  for_each_scalar_row([&](auto in_problem, auto, auto in_abi, auto, ScalarRow) {
    if constexpr (has_member<decltype(in_abi), const A> && has_member<decltype(in_problem), P>)
      if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(in_problem(p))>, Format>)
        if (covers(a, in_abi(a))) assign(in_problem(p), in_abi(a));
  });
}

// p's shape and scalars from case c (a Case into a Problem, a LayerCase into a Layer).
template <class C, class P>
void scalars_from_case(const C& c, P& p) {
  p.shape = c.shape;
  for_each_scalar_row([&](auto in_problem, auto in_case, auto, auto, ScalarRow) {
    if constexpr (has_member<decltype(in_problem), P> && has_member<decltype(in_case), const C>)
      assign(in_problem(p), in_case(c));
  });
}

}  // namespace attncheck
