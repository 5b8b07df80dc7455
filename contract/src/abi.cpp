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

template attncheck_problem to_abi(const Problem<float>&, float*, std::vector<uint8_t>&);
template attncheck_problem to_abi(const Problem<double>&, double*, std::vector<uint8_t>&);
template Problem<float> from_abi(const attncheck_problem&);
template Problem<double> from_abi(const attncheck_problem&);

}  // namespace attncheck
