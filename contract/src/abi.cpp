#include "attncheck/abi.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "attncheck/call_scalars.hpp"

namespace attncheck {

template <class T>
attncheck_problem to_abi(const Problem<T>& p, T* out, std::vector<uint8_t>& allow_storage) {
  // allow_storage: [B,Tq,Tk] when key lengths are folded in.
  const Shape& s = p.shape;
  if (s.kv_heads() != s.H) throw std::invalid_argument("plugin ABI v1 has no grouped KV heads (H_kv != H)");
  const uint8_t* allow = p.masks.allow;
  if (p.masks.key_lengths) {
    const Masks without_causal{p.masks.allow, Causal::none, p.masks.key_lengths};  // causal crosses on its own
    allow_storage.resize(size_t(s.allow_size()));
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t i = 0; i < s.Tq; ++i)
        for (int64_t j = 0; j < s.Tk; ++j) allow_storage[size_t(s.allow_at(b, i) + j)] = permits(without_causal, s, b, i, j);
    allow = allow_storage.data();
  }
  attncheck_problem a{};
  scalars_to_abi(p, a);
  a.q = p.q;  // ABI v1's four inputs, key lengths folded into allow
  a.k = p.k;
  a.v = p.v;
  a.allow = allow;
  a.out = out;
  return a;
}

template <class T>
Problem<T> from_abi(const attncheck_problem& a) {
  Problem<T> p;
  scalars_from_abi(a, p);
  p.q = static_cast<const T*>(a.q);
  p.k = static_cast<const T*>(a.k);
  p.v = static_cast<const T*>(a.v);
  p.masks.allow = a.allow;
  return p;
}

static_assert(int32_t(Format::f32) == ATTNCHECK_F32 && int32_t(Format::f64) == ATTNCHECK_F64 &&
              int32_t(Format::f16) == ATTNCHECK_F16 && int32_t(Format::bf16) == ATTNCHECK_BF16);

namespace {

// x [n] as bit patterns of format F, and back.
template <class F, class T>
std::vector<uint16_t> narrowed(const T* x, int64_t n) {
  std::vector<uint16_t> bits(static_cast<size_t>(n));
  for (int64_t at = 0; at < n; ++at) bits[size_t(at)] = Precision<F>::from_double(double(x[at])).bits;
  return bits;
}
template <class F, class T>
void widened(const uint16_t* bits, int64_t n, T* x) {
  for (int64_t at = 0; at < n; ++at) x[at] = T(Precision<F>::to_double(F{bits[at]}));
}

}  // namespace

namespace {

// f(slot, pointer) for each slot of `kind` in the call's format (Element::format) that `call`
// holds: the ones a 2-byte format carries as bit patterns.
template <class F>
void for_each_format_slot(const AbiCall& call, CallKind kind, F f) {
  for (const Slot& s : kSlots)
    if (s.element == Element::format && s.role(kind) != Role::none)
      if (const void* at = abi_pointer(call, kind, s)) f(s, at);
}

// The checker's side of a 2-byte call: each input of `call` replaced by its bits in narrow, each
// output by bits that read as NaN until written (remembering where their values go back).
template <class T>
void narrow_call(const AbiCall& call, CallKind kind, const Dims& dims, Format format, NarrowBuffers& narrow) {
  visit_narrow(format, [&](auto zero) {
    using F = decltype(zero);
    const uint16_t nan = Precision<F>::from_double(std::numeric_limits<double>::quiet_NaN()).bits;
    for_each_format_slot(call, kind, [&](const Slot& s, const void* at) {
      const int64_t n = elements(s, dims);
      std::vector<uint16_t>& bits = narrow.bits[index_of(s)];
      if (writes(s, kind)) {
        bits.assign(size_t(n), nan);
        narrow.values_to[index_of(s)] = const_cast<void*>(at);
      } else {
        bits = narrowed<F>(static_cast<const T*>(at), n);
      }
      set_abi_pointer(call, kind, s, bits.data());
    });
  });
}

// The plugin's side of a 2-byte call: each input of `call` widened into `wide` (and pointed to
// by `point`), each output made there, zeros.
void widen_call(const AbiCall& call, CallKind kind, const Dims& dims, Format format, WideBuffers& wide) {
  visit_narrow(format, [&](auto zero) {
    for_each_format_slot(call, kind, [&](const Slot& s, const void* at) {
      const int64_t n = elements(s, dims);
      std::vector<float>& values = wide.values[index_of(s)];
      values.assign(size_t(n), 0);
      if (!writes(s, kind)) widened<decltype(zero)>(static_cast<const uint16_t*>(at), n, values.data());
    });
  });
}

// After a 2-byte call, each written slot's values rounded from `wide` into the ABI's bits.
void narrow_written(const AbiCall& call, CallKind kind, Format format, const WideBuffers& wide) {
  if (is_narrow(format))
    visit_narrow(format, [&](auto zero) {
      for_each_format_slot(call, kind, [&](const Slot& s, const void* at) {
        if (!writes(s, kind)) return;
        const std::vector<float>& values = wide.values[index_of(s)];
        const std::vector<uint16_t> bits = narrowed<decltype(zero)>(values.data(), int64_t(values.size()));
        std::copy(bits.begin(), bits.end(), static_cast<uint16_t*>(const_cast<void*>(at)));
      });
    });
}

// The ABI v2 problem's scalars from `p` (its buffers null).
template <class T>
attncheck_problem_v2 abi_scalars(const Problem<T>& p) {
  attncheck_problem_v2 a{};
  a.size = int32_t(sizeof a);
  scalars_to_abi(p, a);
  return a;
}

}  // namespace

template <class T>
attncheck_problem_v2 to_abi_v2(const Problem<T>& p, T* out, T* lse, NarrowBuffers& narrow, uint8_t* keep) {
  // The inputs (call_schema.hpp); out [B,H,Tq,dv], lse [B,H,Tq], keep [B,H,Tq,Tk].
  attncheck_problem_v2 a = abi_scalars(p);
  const AbiCall call{&a};
  for_each_problem_input(p, [&](const Slot& s, const auto* x) { set_abi_pointer(call, CallKind::forward, s, x); });
  a.out = out;
  a.lse = lse;
  a.dropout_keep = p.dropout_p > 0 ? keep : nullptr;
  if (is_narrow(p.format)) narrow_call<T>(call, CallKind::forward, dims_of(p.shape), p.format, narrow);
  return a;
}

template <class T>
void widen_outputs(Format format, const NarrowBuffers& narrow) {
  if (is_narrow(format))
    visit_narrow(format, [&](auto zero) {
      for (int s = 0; s < slot::kCount; ++s)
        if (narrow.values_to[s])
          widened<decltype(zero)>(narrow.bits[s].data(), int64_t(narrow.bits[s].size()), static_cast<T*>(narrow.values_to[s]));
    });
}

template <class T>
Problem<T> from_abi_v2(const attncheck_problem_v2& a) {
  Problem<T> p;
  scalars_from_abi(a, p);
  const AbiCall call{const_cast<attncheck_problem_v2*>(&a)};
  for_each_problem_input(p, [&](const Slot& s, auto*& x) {
    x = static_cast<std::remove_reference_t<decltype(x)>>(abi_pointer(call, CallKind::forward, s));
  });
  p.shape.varlen = p.cu_seqlens_q != nullptr;  // no dim of its own in the ABI: the packed sequences' offsets say it
  return p;
}

namespace {
// Input x of slot s pointed at its widened values, when it has them.
void point_at_widened(const Slot& s, const WideBuffers& wide, const float*& x) {
  if (!wide.values[index_of(s)].empty()) x = wide.values[index_of(s)].data();
}
// Problem p's inputs in a 2-byte format pointed at their widened values, its format set.
void point_at_widened(Problem<float>& p, Format format, const WideBuffers& wide) {
  p.format = format;
  for_each_problem_input(p, [&](const Slot& s, auto*& x) {
    if constexpr (std::is_same_v<decltype(x), const float*&>) point_at_widened(s, wide, x);
  });
}
}  // namespace

void widen_inputs(const attncheck_problem_v2& a, Problem<float>& p, WideBuffers& wide) {
  // The inputs (call_schema.hpp) widened, out [B,H,Tq,dv] made.
  widen_call({const_cast<attncheck_problem_v2*>(&a)}, CallKind::forward, dims_of(p.shape), Format(a.dtype), wide);
  point_at_widened(p, Format(a.dtype), wide);
}

void narrow_output(const attncheck_problem_v2& a, const WideBuffers& wide) {
  narrow_written({const_cast<attncheck_problem_v2*>(&a)}, CallKind::forward, Format(a.dtype), wide);
}

template <class T>
attncheck_grads_v2 to_abi_grads(const Problem<T>& p, const Grads<T>& g, attncheck_problem_v2& forward, NarrowBuffers& narrow) {
  // out, dout [B,H,Tq,dv] and lse [B,H,Tq] in; dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv] out.
  forward = abi_scalars(p);
  attncheck_grads_v2 a{&forward, g.dout, g.dq, g.dk, g.dv};
  const AbiCall call{&forward, &a};
  for_each_problem_input(p, [&](const Slot& s, const auto* x) { set_abi_pointer(call, CallKind::backward, s, x); });
  forward.out = const_cast<T*>(g.out);  // inputs of the backward
  forward.lse = const_cast<T*>(g.lse);
  if (is_narrow(p.format)) narrow_call<T>(call, CallKind::backward, dims_of(p.shape), p.format, narrow);
  return a;
}

Grads<float> widen_grads_inputs(const attncheck_grads_v2& g, Problem<float>& p, WideBuffers& wide) {
  // The problem's inputs, out and dout [B,H,Tq,dv] widened; dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv] made.
  const Format format = Format(g.problem->dtype);
  widen_call({const_cast<attncheck_problem_v2*>(g.problem), const_cast<attncheck_grads_v2*>(&g)}, CallKind::backward,
             dims_of(p.shape), format, wide);
  point_at_widened(p, format, wide);
  auto at = [&](slot::Id s) { return wide.values[s].data(); };
  return {at(slot::OUT), static_cast<const float*>(g.problem->lse), at(slot::DOUT), at(slot::DQ), at(slot::DK), at(slot::DV)};
}

void narrow_grads(const attncheck_grads_v2& g, const WideBuffers& wide) {
  narrow_written({const_cast<attncheck_problem_v2*>(g.problem), const_cast<attncheck_grads_v2*>(&g)}, CallKind::backward,
                 Format(g.problem->dtype), wide);
}

template <class T>
attncheck_mha_v2 to_abi_mha(const Layer<T>& l, T* out, T* weights, NarrowBuffers& narrow) {
  // x_q [B,Tq,D], x_kv [B,Tk,D], the maps and biases (layer.hpp); out [B,Tq,D], weights [B,H,Tq,Tk].
  attncheck_mha_v2 m{};
  m.size = int32_t(sizeof m);
  scalars_to_abi(l, m);
  const AbiCall call{nullptr, nullptr, &m};
  for_each_layer_mask(l, [&](const Slot& s, const auto* x) { set_abi_pointer(call, CallKind::layer, s, x); });
  for_each_layer_input(l, [&](const Slot& s, const T* x) { set_abi_pointer(call, CallKind::layer, s, x); });
  m.out = out;
  m.weights = reinterpret_cast<float*>(weights);  // double for f64, as the ABI says
  if (is_narrow(l.format)) {
    narrow_call<T>(call, CallKind::layer, dims_of(l.shape), l.format, narrow);
    if (l.x_kv == l.x_q) m.x_kv = m.x_q;  // self-attention keeps one pointer
  }
  return m;
}

template <class T>
Layer<T> from_abi_mha(const attncheck_mha_v2& m) {
  Layer<T> l;
  scalars_from_abi(m, l);
  const AbiCall call{nullptr, nullptr, const_cast<attncheck_mha_v2*>(&m)};
  auto read = [&](const Slot& s, auto*& x) {
    x = static_cast<std::remove_reference_t<decltype(x)>>(abi_pointer(call, CallKind::layer, s));
  };
  for_each_layer_mask(l, read);
  for_each_layer_input(l, read);
  return l;
}

void widen_layer_inputs(const attncheck_mha_v2& m, Layer<float>& l, WideBuffers& wide) {
  // The layer's inputs widened, out [B,Tq,D] made.
  l.format = Format(m.dtype);
  widen_call({nullptr, nullptr, const_cast<attncheck_mha_v2*>(&m)}, CallKind::layer, dims_of(l.shape.heads, l.shape.D), l.format,
             wide);
  for_each_layer_input(l, [&](const Slot& s, const float*& x) { point_at_widened(s, wide, x); });
  if (m.x_kv == m.x_q) l.x_kv = l.x_q;
}

void narrow_layer_output(const attncheck_mha_v2& m, const WideBuffers& wide) {
  narrow_written({nullptr, nullptr, const_cast<attncheck_mha_v2*>(&m)}, CallKind::layer, Format(m.dtype), wide);
}

template attncheck_mha_v2 to_abi_mha(const Layer<float>&, float*, float*, NarrowBuffers&);
template attncheck_mha_v2 to_abi_mha(const Layer<double>&, double*, double*, NarrowBuffers&);
template Layer<float> from_abi_mha(const attncheck_mha_v2&);
template Layer<double> from_abi_mha(const attncheck_mha_v2&);
template attncheck_problem to_abi(const Problem<float>&, float*, std::vector<uint8_t>&);
template attncheck_problem to_abi(const Problem<double>&, double*, std::vector<uint8_t>&);
template Problem<float> from_abi(const attncheck_problem&);
template Problem<double> from_abi(const attncheck_problem&);
template attncheck_problem_v2 to_abi_v2(const Problem<float>&, float*, float*, NarrowBuffers&, uint8_t*);
template attncheck_problem_v2 to_abi_v2(const Problem<double>&, double*, double*, NarrowBuffers&, uint8_t*);
template void widen_outputs<float>(Format, const NarrowBuffers&);
template void widen_outputs<double>(Format, const NarrowBuffers&);
template attncheck_grads_v2 to_abi_grads(const Problem<float>&, const Grads<float>&, attncheck_problem_v2&, NarrowBuffers&);
template attncheck_grads_v2 to_abi_grads(const Problem<double>&, const Grads<double>&, attncheck_problem_v2&, NarrowBuffers&);
template Problem<float> from_abi_v2(const attncheck_problem_v2&);
template Problem<double> from_abi_v2(const attncheck_problem_v2&);

}  // namespace attncheck
