#include "layer_variant.hpp"

#include <Eigen/Core>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "attncheck/attention.hpp"
#include "attncheck/mha.hpp"
#include "attncheck/softmax.hpp"

namespace attncheck {

namespace {

// ---- The misread inputs: the layer as a planted bug reads it (the other variants' steps unchanged).

// w [rows, n d] with one head per query head, head h that of KV head h % n: the heads tiled
// (torch's repeat) where repeat_interleave (h / (H / n)) was meant.
template <class T>
std::vector<T> tile_heads(const T* w, int64_t rows, int64_t n, int64_t d, int64_t H) {
  std::vector<T> tiled(size_t(rows * H * d));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t c = 0; c < d; ++c) tiled[size_t((r * H + h) * d + c)] = w[(r * n + h % n) * d + c];
  return tiled;
}

template <class T>
class Misread {
 public:
  Misread(const Layer<T>& l, LayerMutation mutation) : layer(l) {
    const LayerShape& s = l.shape;
    const Shape& h = s.heads;
    switch (mutation) {
      case LayerMutation::w_q_transposed:
        if (s.D == s.q_width()) {
          w_q_.resize(size_t(s.D * s.D));
          for (int64_t k = 0; k < s.D; ++k)
            for (int64_t c = 0; c < s.D; ++c) w_q_[size_t(k * s.D + c)] = l.w_q[c * s.D + k];
          layer.w_q = w_q_.data();
        }
        break;
      case LayerMutation::q_bias_dropped:
        layer.b_q = nullptr;
        break;
      case LayerMutation::out_bias_dropped:
        layer.b_o = nullptr;
        break;
      case LayerMutation::scale_from_d_model:
        if (l.scale == 0) layer.scale = 1 / std::sqrt(double(s.D));
        break;
      case LayerMutation::padding_mask_polarity_of_mha:
        if (l.masks.key_lengths) {
          allow_.resize(size_t(h.allow_size()));
          for (int64_t b = 0; b < h.B; ++b)
            for (int64_t i = 0; i < h.Tq; ++i)
              for (int64_t j = 0; j < h.Tk; ++j) {
                const int64_t at = h.allow_at(b, i) + j;
                allow_[size_t(at)] = (!l.masks.allow || l.masks.allow[at]) && j >= l.masks.key_lengths[b];
              }
          layer.masks.allow = allow_.data();
          layer.masks.key_lengths = nullptr;
        }
        break;
      case LayerMutation::self_attention_path_drops_padding:
        if (l.x_kv == l.x_q) layer.masks.key_lengths = nullptr;
        break;
      case LayerMutation::kv_heads_from_query_heads:
        if (h.kv_heads() < h.H) {
          const int64_t n = h.kv_heads();
          w_k_ = tile_heads(l.w_k, s.D, n, h.dk, h.H);
          w_v_ = tile_heads(l.w_v, s.D, n, h.dv, h.H);
          layer.w_k = w_k_.data();
          layer.w_v = w_v_.data();
          if (l.b_k) layer.b_k = (b_k_ = tile_heads(l.b_k, 1, n, h.dk, h.H)).data();
          if (l.b_v) layer.b_v = (b_v_ = tile_heads(l.b_v, 1, n, h.dv, h.H)).data();
          layer.shape.heads.H_kv = h.H;
        }
        break;
      default:
        break;
    }
  }
  Misread(const Misread&) = delete;
  Misread& operator=(const Misread&) = delete;

  Layer<T> layer;

 private:
  std::vector<T> w_q_, w_k_, w_v_, b_k_, b_v_;
  std::vector<uint8_t> allow_;
};

// ---- The row layout (d2l, packed_qkv): projections, heads split, attention(), merged, projected.

template <class T>
struct Projections {
  std::vector<T> q, k, v;  // [B,Tq,H dk], [B,Tk,H_kv dk], [B,Tk,H_kv dv], in the layer's format
};

template <class T>
Projections<T> separate_projections(const Layer<T>& l) {
  const LayerShape& s = l.shape;
  const Shape& h = s.heads;
  return {project(l.x_q, h.B * h.Tq, s.D, l.w_q, l.b_q, s.q_width(), l.format),
          project(l.x_kv, h.B * h.Tk, s.D, l.w_k, l.b_k, s.k_width(), l.format),
          project(l.x_kv, h.B * h.Tk, s.D, l.w_v, l.b_v, s.v_width(), l.format)};
}

// Columns first .. first + n - 1 of y [rows, width].
template <class T>
std::vector<T> slice_columns(const std::vector<T>& y, int64_t rows, int64_t width, int64_t first, int64_t n) {
  std::vector<T> part(size_t(rows * n));
  for (int64_t r = 0; r < rows; ++r) std::copy_n(y.begin() + (r * width + first), n, part.begin() + r * n);
  return part;
}

template <class T>
Projections<T> packed_projections(const Layer<T>& l) {
  const LayerShape& s = l.shape;
  const Shape& h = s.heads;
  const int64_t qw = s.q_width(), kw = s.k_width(), vw = s.v_width(), width = qw + kw + vw;
  // in_proj_weight [D][qw + kw + vw] and in_proj_bias (a missing part zero; none when all are).
  std::vector<T> w(size_t(s.D * width)), b;
  for (int64_t r = 0; r < s.D; ++r) {
    std::copy_n(l.w_q + r * qw, qw, w.begin() + r * width);
    std::copy_n(l.w_k + r * kw, kw, w.begin() + (r * width + qw));
    std::copy_n(l.w_v + r * vw, vw, w.begin() + (r * width + qw + kw));
  }
  if (l.b_q || l.b_k || l.b_v) {
    b.assign(size_t(width), T(0));
    if (l.b_q) std::copy_n(l.b_q, qw, b.begin());
    if (l.b_k) std::copy_n(l.b_k, kw, b.begin() + qw);
    if (l.b_v) std::copy_n(l.b_v, vw, b.begin() + (qw + kw));
  }
  const T* bias = b.empty() ? nullptr : b.data();
  const std::vector<T> packed_q = project(l.x_q, h.B * h.Tq, s.D, w.data(), bias, width, l.format);
  const std::vector<T> packed_kv = l.x_kv == l.x_q ? packed_q : project(l.x_kv, h.B * h.Tk, s.D, w.data(), bias, width, l.format);
  return {slice_columns(packed_q, h.B * h.Tq, width, 0, qw), slice_columns(packed_kv, h.B * h.Tk, width, qw, kw),
          slice_columns(packed_kv, h.B * h.Tk, width, qw + kw, vw)};
}

// x [dims] permuted: y[i0,i1,i2,i3] = x at index i_k on axis perm[k] (torch's permute, made contiguous).
template <class T>
std::vector<T> permute(const std::vector<T>& x, std::array<int64_t, 4> dims, std::array<int, 4> perm) {
  std::array<int64_t, 4> stride{0, 0, 0, 1}, out;
  for (int a = 2; a >= 0; --a) stride[size_t(a)] = stride[size_t(a + 1)] * dims[size_t(a + 1)];
  for (size_t a = 0; a < 4; ++a) out[a] = dims[size_t(perm[a])];
  std::vector<T> y(x.size());
  size_t n = 0;
  for (int64_t i0 = 0; i0 < out[0]; ++i0)
    for (int64_t i1 = 0; i1 < out[1]; ++i1)
      for (int64_t i2 = 0; i2 < out[2]; ++i2)
        for (int64_t i3 = 0; i3 < out[3]; ++i3)
          y[n++] = x[size_t(i0 * stride[size_t(perm[0])] + i1 * stride[size_t(perm[1])] + i2 * stride[size_t(perm[2])] +
                            i3 * stride[size_t(perm[3])])];
  return y;
}

// D2L's transpose_qkv: y [B,T,n d] reshaped [B,T,n,d] (the bug: [B,T,d,n]) and permuted to [B,n,T,d].
template <class T>
std::vector<T> d2l_transpose_qkv(const std::vector<T>& y, int64_t B, int64_t T_, int64_t n, int64_t d, LayerMutation m) {
  if (m == LayerMutation::heads_split_dk_major) return permute(y, {B, T_, d, n}, {0, 3, 1, 2});
  return permute(y, {B, T_, n, d}, {0, 2, 1, 3});
}

// D2L's transpose_output: heads [B,n,T,d] permuted to [B,T,n,d] (the bugs: to [B,T,d,n]; or not at
// all) and reshaped [B,T,n d].
template <class T>
std::vector<T> d2l_transpose_output(const std::vector<T>& heads, int64_t B, int64_t T_, int64_t n, int64_t d, LayerMutation m) {
  if (m == LayerMutation::heads_merged_untransposed) return heads;
  if (m == LayerMutation::heads_split_dk_major) return permute(heads, {B, n, T_, d}, {0, 2, 3, 1});
  return permute(heads, {B, n, T_, d}, {0, 2, 1, 3});
}

// The row layout around attention(): split(y, B, length, n, d) -> [B,n,length,d], merge its inverse.
template <class T, class Split, class Merge>
void row_layout(const Layer<T>& l, const LayerResult<T>& r, const Projections<T>& p, Split split, Merge merge) {
  const LayerShape& s = l.shape;
  const Shape& h = s.heads;
  const std::vector<T> q_h = split(p.q, h.B, h.Tq, h.H, h.dk), k_h = split(p.k, h.B, h.Tk, h.kv_heads(), h.dk),
                       v_h = split(p.v, h.B, h.Tk, h.kv_heads(), h.dv);
  std::vector<T> heads(size_t(h.out_size()));
  attention(heads_problem(l, q_h.data(), k_h.data(), v_h.data()), Result<T>{heads.data(), r.weights});
  const std::vector<T> merged = merge(heads, h.B, h.Tq, h.H, h.dv);
  const std::vector<T> out = project(merged.data(), h.B * h.Tq, s.merged_width(), l.w_o, l.b_o, s.D, l.format);
  std::copy(out.begin(), out.end(), r.out);
}

// ---- UDL's column layout: one column per token.

template <class T>
using ColMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

// Y^T [cols, N] = w^T [cols, D] X^T [D, N] + b 1^T, summed in T and rounded to the format. A
// row-major w [D, cols] is, read column-major, w^T [cols, D] already.
template <class T>
ColMatrix<T> project_columns(const T* w, const T* b, int64_t cols, int64_t D, const Eigen::Map<const ColMatrix<T>>& x_t,
                             Format format) {
  ColMatrix<T> y = Eigen::Map<const ColMatrix<T>>(w, cols, D) * x_t;
  if (b) y.colwise() += Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(b, cols);
  if (is_narrow(format)) y = y.unaryExpr([format](T e) { return T(round_to(format, double(e))); });
  return y;
}

template <class T>
void udl_forward(const Layer<T>& l, const LayerResult<T>& r, bool softmax_over_queries) {
  using ConstColMap = Eigen::Map<const ColMatrix<T>>;
  const LayerShape& s = l.shape;
  const Shape& h = s.heads;
  const T scale = T(effective_scale(h, l.scale)), minus_inf = -std::numeric_limits<T>::infinity();
  const T empty = l.empty_rows == EmptyRows::zero ? T(0) : std::numeric_limits<T>::quiet_NaN();
  for (int64_t b = 0; b < h.B; ++b) {
    // X^T [D, Tq] and [D, Tk]: the row-major rows of batch b read column-major.
    const ConstColMap x_q_t(l.x_q + s.x_q_at(b, 0), s.D, h.Tq), x_kv_t(l.x_kv + s.x_kv_at(b, 0), s.D, h.Tk);
    const ColMatrix<T> q_t = project_columns(l.w_q, l.b_q, s.q_width(), s.D, x_q_t, l.format);
    const ColMatrix<T> k_t = project_columns(l.w_k, l.b_k, s.k_width(), s.D, x_kv_t, l.format);
    const ColMatrix<T> v_t = project_columns(l.w_v, l.b_v, s.v_width(), s.D, x_kv_t, l.format);
    ColMatrix<T> heads_t(s.merged_width(), h.Tq);  // [H dv, Tq]: head g in rows merged_col(g) ..
    RowMatrix<T> w(h.Tk, h.Tq);                    // one head's K^T Q, then its weights, a column per query
    Eigen::Array<bool, Eigen::Dynamic, Eigen::Dynamic> carries(h.Tk, h.Tq);  // keys whose score is not -inf
    for (int64_t g = 0; g < h.H; ++g) {
      w.noalias() = k_t.middleRows(s.k_col(g), h.dk).transpose() * q_t.middleRows(s.q_col(g), h.dk);
      w *= scale;
      for (int64_t i = 0; i < h.Tq; ++i)
        for (int64_t j = 0; j < h.Tk; ++j) {
          if (!permits(l.masks, h, b, i, j)) w(j, i) = minus_inf;
          carries(j, i) = w(j, i) != minus_inf;
        }
      softmax_stable<T>(w, softmax_over_queries ? Axis::rows : Axis::columns, l.empty_rows);
      // Head g's outputs V_g W [dv, Tq], over the keys that carry weight only; a query with none
      // follows the empty-row policy. In a 2-byte format each rounded to it once.
      const auto v_g = v_t.middleRows(s.v_col(g), h.dv);
      auto out_g = heads_t.middleRows(s.merged_col(g), h.dv);
      for (int64_t i = 0; i < h.Tq; ++i) {
        if (!carries.col(i).any()) {
          out_g.col(i).setConstant(empty);
          continue;
        }
        out_g.col(i).setZero();
        for (int64_t j = 0; j < h.Tk; ++j)
          if (carries(j, i)) out_g.col(i) += w(j, i) * v_g.col(j);
        if (is_narrow(l.format))
          for (int64_t c = 0; c < h.dv; ++c) out_g(c, i) = T(round_to(l.format, double(out_g(c, i))));
      }
      if (r.weights) Eigen::Map<RowMatrix<T>>(r.weights + h.scores_at(b, g, 0), h.Tq, h.Tk) = w.transpose();
    }
    // out^T [D, Tq] = w_o^T heads^T + b_o, transposed back: column-major [D, Tq] is out's rows of batch b.
    Eigen::Map<ColMatrix<T>>(r.out + s.out_at(b, 0), s.D, h.Tq) =
        project_columns(l.w_o, l.b_o, s.D, s.merged_width(), ConstColMap(heads_t.data(), s.merged_width(), h.Tq), l.format);
  }
}

// Every head's weights [B,H,Tq,Tk] replaced by their mean over the heads.
template <class T>
void average_over_heads(const Shape& h, T* weights) {
  for (int64_t b = 0; b < h.B; ++b)
    for (int64_t i = 0; i < h.Tq; ++i)
      for (int64_t j = 0; j < h.Tk; ++j) {
        T sum = 0;
        for (int64_t g = 0; g < h.H; ++g) sum += weights[h.scores_at(b, g, i) + j];
        for (int64_t g = 0; g < h.H; ++g) weights[h.scores_at(b, g, i) + j] = sum / T(h.H);
      }
}

}  // namespace

const std::vector<NamedLayerVariant>& correct_layer_variants() {
  static const std::vector<NamedLayerVariant> variants = {
      {"d2l", LayerVariant::d2l}, {"udl", LayerVariant::udl}, {"packed_qkv", LayerVariant::packed_qkv}};
  return variants;
}

LayerVariant layer_mutant_home(LayerMutation mutation) {
  switch (mutation) {
    case LayerMutation::heads_split_dk_major:
    case LayerMutation::heads_merged_untransposed:
      return LayerVariant::d2l;
    case LayerMutation::softmax_over_queries_in_columns:
      return LayerVariant::udl;
    default:
      return LayerVariant::builtin;
  }
}

template <class T>
void mha_variant(const Layer<T>& layer, const LayerResult<T>& result, LayerVariant variant, LayerMutation mutation) {
  const LayerVariant home = layer_mutant_home(mutation);
  if (home != LayerVariant::builtin && home != variant)
    throw std::invalid_argument("mha_variant: this planted bug is a step of another variant");
  const Misread<T> misread(layer, mutation);
  const Layer<T>& l = misread.layer;
  switch (variant) {
    case LayerVariant::builtin:
      mha_forward(l, result);
      break;
    case LayerVariant::d2l:
      row_layout(
          l, result, separate_projections(l),
          [mutation](const std::vector<T>& y, int64_t B, int64_t T_, int64_t n, int64_t d) {
            return d2l_transpose_qkv(y, B, T_, n, d, mutation);
          },
          [mutation](const std::vector<T>& y, int64_t B, int64_t T_, int64_t n, int64_t d) {
            return d2l_transpose_output(y, B, T_, n, d, mutation);
          });
      break;
    case LayerVariant::udl:
      udl_forward(l, result, mutation == LayerMutation::softmax_over_queries_in_columns);
      break;
    case LayerVariant::packed_qkv:
      row_layout(l, result, packed_projections(l), split_heads<T>, merge_heads<T>);
      break;
  }
  if (mutation == LayerMutation::weights_averaged_over_heads && result.weights) average_over_heads(l.shape.heads, result.weights);
}

template void mha_variant(const Layer<float>&, const LayerResult<float>&, LayerVariant, LayerMutation);
template void mha_variant(const Layer<double>&, const LayerResult<double>&, LayerVariant, LayerMutation);

}  // namespace attncheck
