#include "attncheck/attention_backward.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attncheck/softmax.hpp"
#include "scores.hpp"

namespace attncheck {

template <class T>
void attention_backward(const Problem<T>& p, const Grads<T>& g) {
  // Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], bias [B,H,Tq,Tk], out [B,H,Tq,dv], lse [B,H,Tq],
  // dout [B,H,Tq,dv] in; dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv] out.
  using ConstMap = Eigen::Map<const RowMatrix<T>>;
  using Map = Eigen::Map<RowMatrix<T>>;
  const Shape& s = p.shape;
  const T scale = T(effective_scale(s, p.scale));
  const T minus_inf = -std::numeric_limits<T>::infinity();

  // Workspaces reused across (b, h): masked scores turned weights P [Tq,Tk], tanh(t / softcap) [Tq,Tk],
  // permission [Tq,Tk], one row's dT [Tk], and the keys of one row that carry weight [<= Tk].
  RowMatrix<T> w(s.Tq, s.Tk), tanh_t(s.Tq, s.Tk);
  Permission permitted(s.Tq, s.Tk);
  Eigen::Matrix<T, 1, Eigen::Dynamic> dt_i(s.Tk);
  std::vector<int64_t> keys_i;
  keys_i.reserve(size_t(s.Tk));

  // dk and dv are sums over the query heads of a group and over the rows of each head.
  std::fill_n(g.dk, s.k_size(), T(0));
  std::fill_n(g.dv, s.v_size(), T(0));

  for (int64_t b = 0; b < s.B; ++b) {
    permission(p, b, permitted);  // as the forward has it; shared by all heads

    for (int64_t h = 0; h < s.H; ++h) {
      // Head h's rows; the keys, values and their gradients of its KV head (dk and dv as K and V).
      ConstMap Q_bh(p.q + s.q_at(b, h, 0), s.Tq, s.dk);
      ConstMap K_bh(p.k + s.k_at(b, h, 0), s.Tk, s.dk);
      ConstMap V_bh(p.v + s.v_at(b, h, 0), s.Tk, s.dv);
      ConstMap out_bh(g.out + s.out_at(b, h, 0), s.Tq, s.dv);
      ConstMap dout_bh(g.dout + s.out_at(b, h, 0), s.Tq, s.dv);
      Map dQ_bh(g.dq + s.q_at(b, h, 0), s.Tq, s.dk);
      Map dK_bh(g.dk + s.k_at(b, h, 0), s.Tk, s.dk);
      Map dV_bh(g.dv + s.v_at(b, h, 0), s.Tk, s.dv);

      // Pass 1: the forward's masked scores s_ij = cap(t_ij) + bias_ij, t_ij = scale q_i . k_j, -inf
      // where key j is forbidden (by a mask or a -inf bias); tanh(t_ij / softcap) kept for its derivative.
      masked_scores(p, b, h, permitted, w, &tanh_t);

      for (int64_t i = 0; i < s.Tq; ++i) {
        // The keys that carry weight in row i, as the forward finds them: only their k and v are read.
        keys_i.clear();
        for (int64_t j = 0; j < s.Tk; ++j)
          if (w(i, j) != minus_inf) keys_i.push_back(j);
        dQ_bh.row(i).setZero();
        if (keys_i.empty()) continue;  // an empty row: out is a constant, nothing flows back

        // Pass 2: row i's weights from the forward's lse, and dT_ij, the gradient of t_ij.
        // Forward: const T lse_i = softmax_stable(&w(i, 0), s.Tk, 1, p.empty_rows);
        // that is p_ij = exp(s_ij - lse_i), so with dP_ij = dout_i . v_j and
        // D_i = sum_j p_ij dP_ij = dout_i . out_i, dS_ij = p_ij (dP_ij - D_i).
        const T lse_i = g.lse[s.lse_at(b, h, i)];
        const T D_i = dout_bh.row(i).dot(out_bh.row(i));
        for (int64_t j : keys_i) {
          w(i, j) = std::exp(w(i, j) - lse_i);
          const T dS_ij = w(i, j) * (dout_bh.row(i).dot(V_bh.row(j)) - D_i);
          // Forward: w = w.unaryExpr([softcap](T x) { return softcap * std::tanh(x / softcap); });
          dt_i(j) = p.softcap != 0 ? dS_ij * (1 - tanh_t(i, j) * tanh_t(i, j)) : dS_ij;
        }

        // Pass 3: the products over the same keys. Forward: out_bh.row(i) += w(i, j) * V_bh.row(j);
        // and w.noalias() = Q_bh * K_bh.transpose(); w *= scale; (dK's scale applied once, in pass 4).
        for (int64_t j : keys_i) {
          dV_bh.row(j) += w(i, j) * dout_bh.row(i);
          dQ_bh.row(i) += dt_i(j) * K_bh.row(j);
          dK_bh.row(j) += dt_i(j) * Q_bh.row(i);
        }
        dQ_bh.row(i) *= scale;
      }
    }
  }

  // Pass 4: dK's scale; in a 2-byte format, every gradient rounded to it once, from T.
  auto stored = [&p](T x) { return is_narrow(p.format) ? T(round_to(p.format, double(x))) : x; };
  std::transform(g.dk, g.dk + s.k_size(), g.dk, [&](T x) { return stored(scale * x); });
  std::transform(g.dq, g.dq + s.q_size(), g.dq, stored);
  std::transform(g.dv, g.dv + s.v_size(), g.dv, stored);
}

template void attention_backward(const Problem<float>&, const Grads<float>&);
template void attention_backward(const Problem<double>&, const Grads<double>&);

}  // namespace attncheck
