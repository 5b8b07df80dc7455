#include "attncheck/abi.hpp"

#include <stdexcept>

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

template <class T>
attncheck_problem_v2 to_abi_v2(const Problem<T>& p, T* out, T* lse) {
  const Shape& s = p.shape;
  attncheck_problem_v2 a{};
  a.size = int32_t(sizeof a);
  a.dtype = abi_dtype<T>;
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
  return a;
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

template attncheck_problem to_abi(const Problem<float>&, float*, std::vector<uint8_t>&);
template attncheck_problem to_abi(const Problem<double>&, double*, std::vector<uint8_t>&);
template Problem<float> from_abi(const attncheck_problem&);
template Problem<double> from_abi(const attncheck_problem&);
template attncheck_problem_v2 to_abi_v2(const Problem<float>&, float*, float*);
template attncheck_problem_v2 to_abi_v2(const Problem<double>&, double*, double*);
template Problem<float> from_abi_v2(const attncheck_problem_v2&);
template Problem<double> from_abi_v2(const attncheck_problem_v2&);

}  // namespace attncheck
