#include "attncheck/abi.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <type_traits>

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
  return {int32_t(s.B), int32_t(s.H),  int32_t(s.Tq), int32_t(s.Tk),          int32_t(s.dk), int32_t(s.dv),
          p.q,          p.k,           p.v,           allow, int32_t(p.masks.causal), p.scale, out};
}

template <class T>
Problem<T> from_abi(const attncheck_problem& a) {
  Problem<T> p;
  p.shape = {a.batch, a.heads, a.q_len, a.kv_len, a.d_k, a.d_v};
  p.q = static_cast<const T*>(a.q);
  p.k = static_cast<const T*>(a.k);
  p.v = static_cast<const T*>(a.v);
  p.masks.allow = a.allow;
  p.masks.causal = Causal(a.causal);
  p.scale = a.scale;
  return p;
}

static_assert(int32_t(Format::f32) == ATTNCHECK_F32 && int32_t(Format::f64) == ATTNCHECK_F64 &&
              int32_t(Format::f16) == ATTNCHECK_F16 && int32_t(Format::bf16) == ATTNCHECK_BF16);

std::string formats_named(uint32_t capabilities) {
  std::string names;
  for (Format f : {Format::f32, Format::f64, Format::f16, Format::bf16})
    if (capabilities & capability_of(f))
      names += (names.empty() ? "" : ", ") + std::string(visit_format(f, [](auto zero) { return Precision<decltype(zero)>::short_name; }));
  return names.empty() ? "none" : names;
}

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

template <class T>
attncheck_problem_v2 to_abi_v2(const Problem<T>& p, T* out, T* lse, NarrowBuffers& narrow) {
  // q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv], bias [B,H,Tq,Tk]; out [B,H,Tq,dv], lse [B,H,Tq].
  const Shape& s = p.shape;
  attncheck_problem_v2 a{};
  a.size = int32_t(sizeof a);
  a.dtype = int32_t(p.format);
  a.batch = int32_t(s.B);
  a.heads = int32_t(s.H);
  a.kv_heads = int32_t(s.kv_heads());
  a.q_len = int32_t(s.Tq);
  a.kv_len = int32_t(s.Tk);
  a.d_k = int32_t(s.dk);
  a.d_v = int32_t(s.dv);
  a.q = p.q;
  a.k = p.k;
  a.v = p.v;
  a.allow = p.masks.allow;
  a.kv_lens = p.masks.key_lengths;
  a.bias = p.bias;
  a.causal = int32_t(p.masks.causal);
  a.window_left = int32_t(p.masks.window_left);
  a.window_right = int32_t(p.masks.window_right);
  a.scale = p.scale;
  a.softcap = p.softcap;
  a.out = out;
  a.lse = lse;
  if (is_narrow(p.format))
    visit_narrow(p.format, [&](auto zero) {
      using F = decltype(zero);
      narrow.q = narrowed<F>(p.q, s.q_size());
      narrow.k = narrowed<F>(p.k, s.k_size());
      narrow.v = narrowed<F>(p.v, s.v_size());
      narrow.bias = p.bias ? narrowed<F>(p.bias, s.scores_size()) : std::vector<uint16_t>{};
      // Unwritten outputs read as NaN, and fail.
      narrow.out.assign(size_t(s.out_size()), Precision<F>::from_double(std::numeric_limits<double>::quiet_NaN()).bits);
      a.q = narrow.q.data();
      a.k = narrow.k.data();
      a.v = narrow.v.data();
      a.bias = p.bias ? narrow.bias.data() : nullptr;
      a.out = narrow.out.data();
    });
  return a;
}

template <class T>
void widen_output(const Problem<T>& p, const NarrowBuffers& narrow, T* out) {
  if (is_narrow(p.format))
    visit_narrow(p.format, [&](auto zero) { widened<decltype(zero)>(narrow.out.data(), p.shape.out_size(), out); });
}

template <class T>
Problem<T> from_abi_v2(const attncheck_problem_v2& a) {
  Problem<T> p;
  p.shape = {a.batch, a.heads, a.q_len, a.kv_len, a.d_k, a.d_v, a.kv_heads};
  p.q = static_cast<const T*>(a.q);
  p.k = static_cast<const T*>(a.k);
  p.v = static_cast<const T*>(a.v);
  p.masks = {a.allow, Causal(a.causal), a.kv_lens, a.window_left, a.window_right};
  p.bias = static_cast<const T*>(a.bias);
  p.scale = a.scale;
  p.softcap = a.softcap;
  return p;
}

void widen_inputs(const attncheck_problem_v2& a, Problem<float>& p, WideBuffers& wide) {
  // q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv], bias [B,H,Tq,Tk] widened; out [B,H,Tq,dv] made.
  p.format = Format(a.dtype);
  visit_narrow(p.format, [&](auto zero) {
    using F = decltype(zero);
    const Shape& s = p.shape;
    auto widen = [](const void* bits, int64_t n, std::vector<float>& x) {
      x.resize(size_t(n));
      widened<F>(static_cast<const uint16_t*>(bits), n, x.data());
      return x.data();
    };
    p.q = widen(a.q, s.q_size(), wide.q);
    p.k = widen(a.k, s.k_size(), wide.k);
    p.v = widen(a.v, s.v_size(), wide.v);
    p.bias = a.bias ? widen(a.bias, s.scores_size(), wide.bias) : nullptr;
    wide.out.assign(size_t(s.out_size()), 0);
  });
}

void narrow_output(const attncheck_problem_v2& a, const WideBuffers& wide) {
  const Format format = Format(a.dtype);
  if (is_narrow(format))
    visit_narrow(format, [&](auto zero) {
      using F = decltype(zero);
      const std::vector<uint16_t> bits = narrowed<F>(wide.out.data(), int64_t(wide.out.size()));
      std::copy(bits.begin(), bits.end(), static_cast<uint16_t*>(a.out));
    });
}

template attncheck_problem to_abi(const Problem<float>&, float*, std::vector<uint8_t>&);
template attncheck_problem to_abi(const Problem<double>&, double*, std::vector<uint8_t>&);
template Problem<float> from_abi(const attncheck_problem&);
template Problem<double> from_abi(const attncheck_problem&);
template attncheck_problem_v2 to_abi_v2(const Problem<float>&, float*, float*, NarrowBuffers&);
template attncheck_problem_v2 to_abi_v2(const Problem<double>&, double*, double*, NarrowBuffers&);
template void widen_output(const Problem<float>&, const NarrowBuffers&, float*);
template void widen_output(const Problem<double>&, const NarrowBuffers&, double*);
template Problem<float> from_abi_v2(const attncheck_problem_v2&);
template Problem<double> from_abi_v2(const attncheck_problem_v2&);

}  // namespace attncheck
