#include "attncheck/attention.hpp"

#include <Eigen/Core>
#include <cmath>
#include <limits>
#include <vector>

#include "attncheck/dropout.hpp"
#include "attncheck/softmax.hpp"
#include "scores.hpp"

namespace attncheck {

template <class T>
void permission(const Problem<T>& p, int64_t b, Permission& permitted) {
  const Shape& s = p.shape;
  for (int64_t i = 0; i < s.Tq; ++i)
    for (int64_t j = 0; j < s.Tk; ++j) permitted(i, j) = permits(p.masks, s, b, i, j);
}

template <class T>
void masked_scores(const Problem<T>& p, int64_t b, int64_t h, const Permission& permitted, RowMatrix<T>& w,
                   RowMatrix<T>* tanh_t) {
  // Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], bias [B,H,Tq,Tk] in; w and tanh_t [Tq,Tk] out.
  using ConstMap = Eigen::Map<const RowMatrix<T>>;
  const Shape& s = p.shape;
  const T scale = T(effective_scale(s, p.scale)), softcap = T(p.softcap);
  const T minus_inf = -std::numeric_limits<T>::infinity();
  w.noalias() = ConstMap(p.q + s.q_at(b, h, 0), s.Tq, s.dk) * ConstMap(p.k + s.k_at(b, h, 0), s.Tk, s.dk).transpose();
  w *= scale;
  if (p.softcap != 0 && tanh_t) {
    *tanh_t = w.unaryExpr([softcap](T x) { return std::tanh(x / softcap); });
    w = softcap * *tanh_t;
  } else if (p.softcap != 0) {
    w = w.unaryExpr([softcap](T x) { return softcap * std::tanh(x / softcap); });
  }
  if (p.bias) {
    const ConstMap bias_bh(p.bias + s.scores_at(b, h, 0), s.Tq, s.Tk);
    w = (bias_bh.array() == minus_inf).select(minus_inf, w + bias_bh);
  }
  w = permitted.select(w, minus_inf);
}

template <class T>
void attention(const Problem<T>& given, const Result<T>& r) {
  // Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv] (or paged pools, gathered first; or varlen's
  // packed [H,Tq,dk] ..., as one batch under its sequences' mask), bias
  // [B,H,Tq,Tk], sinks [H] in; out [B,H,Tq,dv], weights [B,H,Tq,Tk], lse [B,H,Tq] out.
  using ConstMap = Eigen::Map<const RowMatrix<T>>;
  using Map = Eigen::Map<RowMatrix<T>>;
  TwinBuffers<T> twin;
  const Problem<T> p = dense_of(given, twin);
  const Shape& s = p.shape;
  const T minus_inf = -std::numeric_limits<T>::infinity();

  // Workspaces reused across (b, h): masked scores turned weights [Tq,Tk], permission [Tq,Tk],
  // the keys of one row that carry weight [<= Tk], and its dropout draws [Tk].
  RowMatrix<T> w(s.Tq, s.Tk);
  Permission permitted(s.Tq, s.Tk);
  std::vector<int64_t> keys_i;
  keys_i.reserve(size_t(s.Tk));
  std::vector<uint8_t> keep_i(p.dropout_p > 0 ? size_t(s.Tk) : 0);

  for (int64_t b = 0; b < s.B; ++b) {
    permission(p, b, permitted);  // shared by all heads

    for (int64_t h = 0; h < s.H; ++h) {
      // Head h's outputs; the values of its KV head; its sink (-inf for none).
      ConstMap V_bh(p.v + s.v_at(b, h, 0), s.Tk, s.dv);
      Map out_bh(r.out + s.out_at(b, h, 0), s.Tq, s.dv);
      const T sink_h = has_sink(p, h) ? T(p.sinks[h]) : minus_inf;

      // Pass 1: scores s_ij = cap(scale * q_i . k_j) + bias_ij, -inf where key j is forbidden.
      masked_scores(p, b, h, permitted, w);

      for (int64_t i = 0; i < s.Tq; ++i) {
        // The keys that can carry weight in row i: those whose masked score is not -inf (forbidden
        // by a mask, by the bias, or by its own -inf). Only their values are ever read.
        keys_i.clear();
        for (int64_t j = 0; j < s.Tk; ++j)
          if (w(i, j) != minus_inf) keys_i.push_back(j);

        // Pass 2: stable softmax of row i (row max, exp and sum with head h's sink, normalize); lse by the
        // same pass.
        const T lse_i = softmax_stable(&w(i, 0), s.Tk, 1, p.empty_rows, sink_h);
        if (r.lse) r.lse[s.lse_at(b, h, i)] = lse_i;

        const bool empty_row = keys_i.empty() && !has_sink(p, h);  // with a sink, out 0 by the sum below
        // Pass 2b, dropout: weight p_ij kept and multiplied by 1 / (1 - p), or dropped (0, its value
        // never read); the lse above is the weights' before dropout.
        if (p.dropout_p > 0) {
          const T rescale = T(dropout_rescale(p.dropout_p));
          for (int64_t j = 0; j < s.Tk; ++j) {
            keep_i[size_t(j)] = kept(p, b, h, i, j);
            if (r.keep) r.keep[s.scores_at(b, h, i) + j] = keep_i[size_t(j)];
            w(i, j) = keep_i[size_t(j)] ? w(i, j) * rescale : T(0);
          }
          std::erase_if(keys_i, [&](int64_t j) { return !keep_i[size_t(j)]; });
        }

        // Pass 3: weighted sum over those keys; a row without any follows the empty-row policy.
        if (empty_row) {
          out_bh.row(i).setConstant(p.empty_rows == EmptyRows::zero ? T(0) : std::numeric_limits<T>::quiet_NaN());
          continue;
        }
        out_bh.row(i).setZero();
        for (int64_t j : keys_i) out_bh.row(i) += w(i, j) * V_bh.row(j);

        // Pass 4: in a 2-byte format, the row rounded to it once, from T (its weights stay T's).
        if (is_narrow(p.format))
          for (int64_t c = 0; c < s.dv; ++c) out_bh(i, c) = T(round_to(p.format, double(out_bh(i, c))));
      }
      if (r.weights) Map(r.weights + s.scores_at(b, h, 0), s.Tq, s.Tk) = w;
    }
  }
}

template void permission(const Problem<float>&, int64_t, Permission&);
template void permission(const Problem<double>&, int64_t, Permission&);
template void masked_scores(const Problem<float>&, int64_t, int64_t, const Permission&, RowMatrix<float>&, RowMatrix<float>*);
template void masked_scores(const Problem<double>&, int64_t, int64_t, const Permission&, RowMatrix<double>&, RowMatrix<double>*);
template void attention(const Problem<float>&, const Result<float>&);
template void attention(const Problem<double>&, const Result<double>&);

}  // namespace attncheck
