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
  return {int32_t(s.B), int32_t(s.H), int32_t(s.Tq), int32_t(s.Tk), int32_t(s.dk),           int32_t(s.dv),
          p.q,          p.k,          p.v,           allow,         int32_t(p.masks.causal), p.scale,
          out};
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
attncheck_problem_v2 to_abi_v2(const Problem<T>& p, T* out, T* lse, NarrowBuffers& narrow, uint8_t* keep) {
  // q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv], bias [B,H,Tq,Tk]; out [B,H,Tq,dv], lse [B,H,Tq],
  // keep [B,H,Tq,Tk].
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
  a.dropout_p = p.dropout_p;
  a.dropout_seed = p.dropout_seed;
  a.dropout_keep = p.dropout_p > 0 ? keep : nullptr;
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
  if (carries_dropout(a)) {
    p.dropout_p = a.dropout_p;
    p.dropout_seed = a.dropout_seed;
  }
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

template <class T>
attncheck_grads_v2 to_abi_grads(const Problem<T>& p, const Grads<T>& g, attncheck_problem_v2& forward, NarrowBuffers& narrow,
                                NarrowGrads& narrow_grads) {
  // out, dout [B,H,Tq,dv] and lse [B,H,Tq] in; dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv] out.
  const Shape& s = p.shape;
  forward = to_abi_v2(p, const_cast<T*>(g.out), const_cast<T*>(g.lse), narrow);  // inputs of the backward
  attncheck_grads_v2 a{&forward, g.dout, g.dq, g.dk, g.dv};
  if (is_narrow(p.format))
    visit_narrow(p.format, [&](auto zero) {
      using F = decltype(zero);
      narrow_grads.out = narrowed<F>(g.out, s.out_size());
      narrow_grads.dout = narrowed<F>(g.dout, s.out_size());
      const uint16_t nan = Precision<F>::from_double(std::numeric_limits<double>::quiet_NaN()).bits;
      narrow_grads.dq.assign(size_t(s.q_size()), nan);  // unwritten gradients read as NaN
      narrow_grads.dk.assign(size_t(s.k_size()), nan);
      narrow_grads.dv.assign(size_t(s.v_size()), nan);
      forward.out = narrow_grads.out.data();
      a = {&forward, narrow_grads.dout.data(), narrow_grads.dq.data(), narrow_grads.dk.data(), narrow_grads.dv.data()};
    });
  return a;
}

template <class T>
void widen_grads(const Problem<T>& p, const NarrowGrads& narrow_grads, const Grads<T>& g) {
  const Shape& s = p.shape;
  if (is_narrow(p.format))
    visit_narrow(p.format, [&](auto zero) {
      using F = decltype(zero);
      widened<F>(narrow_grads.dq.data(), s.q_size(), g.dq);
      widened<F>(narrow_grads.dk.data(), s.k_size(), g.dk);
      widened<F>(narrow_grads.dv.data(), s.v_size(), g.dv);
    });
}

Grads<float> widen_grads_inputs(const attncheck_grads_v2& g, const Problem<float>& p, WideGrads& wide) {
  // out, dout [B,H,Tq,dv] widened; dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv] made.
  const Shape& s = p.shape;
  visit_narrow(p.format, [&](auto zero) {
    using F = decltype(zero);
    wide.out.resize(size_t(s.out_size()));
    wide.dout.resize(size_t(s.out_size()));
    widened<F>(static_cast<const uint16_t*>(g.problem->out), s.out_size(), wide.out.data());
    widened<F>(static_cast<const uint16_t*>(g.dout), s.out_size(), wide.dout.data());
  });
  wide.dq.assign(size_t(s.q_size()), 0);
  wide.dk.assign(size_t(s.k_size()), 0);
  wide.dv.assign(size_t(s.v_size()), 0);
  return {wide.out.data(), static_cast<const float*>(g.problem->lse), wide.dout.data(), wide.dq.data(), wide.dk.data(),
          wide.dv.data()};
}

void narrow_grads(const attncheck_grads_v2& g, const WideGrads& wide) {
  const Format format = Format(g.problem->dtype);
  if (is_narrow(format))
    visit_narrow(format, [&](auto zero) {
      using F = decltype(zero);
      const std::pair<const std::vector<float>*, void*> gradients[] = {{&wide.dq, g.dq}, {&wide.dk, g.dk}, {&wide.dv, g.dv}};
      for (const auto& [from, to] : gradients) {
        const std::vector<uint16_t> bits = narrowed<F>(from->data(), int64_t(from->size()));
        std::copy(bits.begin(), bits.end(), static_cast<uint16_t*>(to));
      }
    });
}

void layer_input_sizes(const LayerShape& s, int64_t (&sizes)[kLayerInputCount]) {
  const int64_t all[kLayerInputCount] = {
      s.x_q_size(), s.x_kv_size(), s.D * s.q_width(), s.D * s.k_width(),      s.D * s.v_width(),
      s.q_width(),  s.k_width(),   s.v_width(),       s.merged_width() * s.D, s.D};
  std::copy(std::begin(all), std::end(all), sizes);
}

template <class T>
attncheck_mha_v2 to_abi_mha(const Layer<T>& l, T* out, T* weights, NarrowLayer& narrow) {
  // x_q [B,Tq,D], x_kv [B,Tk,D], the maps and biases (layer.hpp); out [B,Tq,D], weights [B,H,Tq,Tk].
  const Shape& h = l.shape.heads;
  attncheck_mha_v2 m{};
  m.size = int32_t(sizeof m);
  m.dtype = int32_t(l.format);
  m.batch = int32_t(h.B);
  m.q_len = int32_t(h.Tq);
  m.kv_len = int32_t(h.Tk);
  m.d_model = int32_t(l.shape.D);
  m.heads = int32_t(h.H);
  m.kv_heads = int32_t(h.kv_heads());
  m.d_k = int32_t(h.dk);
  m.d_v = int32_t(h.dv);
  for (const LayerInput<T>& input : kLayerInputs<T>) m.*input.in_abi = l.*input.in_layer;
  m.allow = l.masks.allow;
  m.kv_lens = l.masks.key_lengths;
  m.causal = int32_t(l.masks.causal);
  m.window_left = int32_t(l.masks.window_left);
  m.window_right = int32_t(l.masks.window_right);
  m.scale = l.scale;
  m.out = out;
  m.weights = reinterpret_cast<float*>(weights);  // double for f64, as the ABI says
  if (is_narrow(l.format))
    visit_narrow(l.format, [&](auto zero) {
      using F = decltype(zero);
      int64_t sizes[kLayerInputCount];
      layer_input_sizes(l.shape, sizes);
      for (int n = 0; n < kLayerInputCount; ++n) {
        const T* x = l.*kLayerInputs<T>[n].in_layer;
        if (!x || (n == 1 && l.x_kv == l.x_q)) continue;
        narrow.inputs[n] = narrowed<F>(x, sizes[n]);
        m.*kLayerInputs<T>[n].in_abi = narrow.inputs[n].data();
      }
      if (l.x_kv == l.x_q) m.x_kv = m.x_q;  // self-attention keeps one pointer
      narrow.out.assign(size_t(l.shape.out_size()), Precision<F>::from_double(std::numeric_limits<double>::quiet_NaN()).bits);
      m.out = narrow.out.data();
    });
  return m;
}

template <class T>
void widen_layer_output(const Layer<T>& l, const NarrowLayer& narrow, T* out) {
  if (is_narrow(l.format))
    visit_narrow(l.format, [&](auto zero) { widened<decltype(zero)>(narrow.out.data(), l.shape.out_size(), out); });
}

template <class T>
Layer<T> from_abi_mha(const attncheck_mha_v2& m) {
  Layer<T> l;
  l.shape = {{m.batch, m.heads, m.q_len, m.kv_len, m.d_k, m.d_v, m.kv_heads}, m.d_model};
  for (const LayerInput<T>& input : kLayerInputs<T>) l.*input.in_layer = static_cast<const T*>(m.*input.in_abi);
  l.masks = {m.allow, Causal(m.causal), m.kv_lens, m.window_left, m.window_right};
  l.scale = m.scale;
  return l;
}

void widen_layer_inputs(const attncheck_mha_v2& m, Layer<float>& l, WideLayer& wide) {
  l.format = Format(m.dtype);
  visit_narrow(l.format, [&](auto zero) {
    using F = decltype(zero);
    int64_t sizes[kLayerInputCount];
    layer_input_sizes(l.shape, sizes);
    for (int n = 0; n < kLayerInputCount; ++n) {
      const void* bits = m.*kLayerInputs<float>[n].in_abi;
      if (!bits || (n == 1 && m.x_kv == m.x_q)) continue;
      wide.inputs[n].resize(size_t(sizes[n]));
      widened<F>(static_cast<const uint16_t*>(bits), sizes[n], wide.inputs[n].data());
      l.*kLayerInputs<float>[n].in_layer = wide.inputs[n].data();
    }
    if (m.x_kv == m.x_q) l.x_kv = l.x_q;
    wide.out.assign(size_t(l.shape.out_size()), 0);
  });
}

void narrow_layer_output(const attncheck_mha_v2& m, const WideLayer& wide) {
  const Format format = Format(m.dtype);
  if (is_narrow(format))
    visit_narrow(format, [&](auto zero) {
      const std::vector<uint16_t> bits = narrowed<decltype(zero)>(wide.out.data(), int64_t(wide.out.size()));
      std::copy(bits.begin(), bits.end(), static_cast<uint16_t*>(m.out));
    });
}

template attncheck_mha_v2 to_abi_mha(const Layer<float>&, float*, float*, NarrowLayer&);
template attncheck_mha_v2 to_abi_mha(const Layer<double>&, double*, double*, NarrowLayer&);
template void widen_layer_output(const Layer<float>&, const NarrowLayer&, float*);
template void widen_layer_output(const Layer<double>&, const NarrowLayer&, double*);
template Layer<float> from_abi_mha(const attncheck_mha_v2&);
template Layer<double> from_abi_mha(const attncheck_mha_v2&);
template attncheck_problem to_abi(const Problem<float>&, float*, std::vector<uint8_t>&);
template attncheck_problem to_abi(const Problem<double>&, double*, std::vector<uint8_t>&);
template Problem<float> from_abi(const attncheck_problem&);
template Problem<double> from_abi(const attncheck_problem&);
template attncheck_problem_v2 to_abi_v2(const Problem<float>&, float*, float*, NarrowBuffers&, uint8_t*);
template attncheck_problem_v2 to_abi_v2(const Problem<double>&, double*, double*, NarrowBuffers&, uint8_t*);
template void widen_output(const Problem<float>&, const NarrowBuffers&, float*);
template void widen_output(const Problem<double>&, const NarrowBuffers&, double*);
template attncheck_grads_v2 to_abi_grads(const Problem<float>&, const Grads<float>&, attncheck_problem_v2&, NarrowBuffers&,
                                         NarrowGrads&);
template attncheck_grads_v2 to_abi_grads(const Problem<double>&, const Grads<double>&, attncheck_problem_v2&, NarrowBuffers&,
                                         NarrowGrads&);
template void widen_grads(const Problem<float>&, const NarrowGrads&, const Grads<float>&);
template void widen_grads(const Problem<double>&, const NarrowGrads&, const Grads<double>&);
template Problem<float> from_abi_v2(const attncheck_problem_v2&);
template Problem<double> from_abi_v2(const attncheck_problem_v2&);

}  // namespace attncheck
