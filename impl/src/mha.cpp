#include "attncheck/mha.hpp"

#include <Eigen/Core>

#include "attncheck/attention.hpp"
#include "attncheck/softmax.hpp"

namespace attncheck {

template <class T>
std::vector<T> project(const T* x, int64_t rows, int64_t D, const T* w, const T* b, int64_t cols, Format format) {
  // x [rows,D], w [D,cols], b [cols] in; y [rows,cols] out.
  using ConstMap = Eigen::Map<const RowMatrix<T>>;
  std::vector<T> y(size_t(rows * cols));
  Eigen::Map<RowMatrix<T>> y_map(y.data(), rows, cols);
  y_map.noalias() = ConstMap(x, rows, D) * ConstMap(w, D, cols);
  if (b) y_map.rowwise() += Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(b, cols);
  if (is_narrow(format))
    for (T& e : y) e = T(round_to(format, double(e)));
  return y;
}

template <class T>
std::vector<T> split_heads(const std::vector<T>& y, int64_t B, int64_t T_, int64_t n, int64_t d) {
  // y [B,T,n d] in; heads [B,n,T,d] out.
  std::vector<T> heads(y.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t g = 0; g < n; ++g)
        for (int64_t c = 0; c < d; ++c)
          heads[size_t(((b * n + g) * T_ + t) * d + c)] = y[size_t((b * T_ + t) * n * d + g * d + c)];
  return heads;
}

template <class T>
std::vector<T> merge_heads(const std::vector<T>& heads, int64_t B, int64_t T_, int64_t n, int64_t d) {
  // heads [B,n,T,d] in; y [B,T,n d] out.
  std::vector<T> y(heads.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t g = 0; g < n; ++g)
        for (int64_t c = 0; c < d; ++c)
          y[size_t((b * T_ + t) * n * d + g * d + c)] = heads[size_t(((b * n + g) * T_ + t) * d + c)];
  return y;
}

template <class T>
Problem<T> heads_problem(const Layer<T>& l, const T* q, const T* k, const T* v) {
  Problem<T> p;
  p.shape = l.shape.heads;
  p.q = q;
  p.k = k;
  p.v = v;
  p.masks = l.masks;
  p.scale = l.scale;
  p.empty_rows = l.empty_rows;
  p.format = l.format;
  return p;
}

template <class T>
void mha_forward(const Layer<T>& l, const LayerResult<T>& r) {
  const LayerShape& s = l.shape;
  const Shape& h = s.heads;
  // Pass 1: the projections, [B,T,width] each, in the layer's format.
  const std::vector<T> q = project(l.x_q, h.B * h.Tq, s.D, l.w_q, l.b_q, s.q_width(), l.format);
  const std::vector<T> k = project(l.x_kv, h.B * h.Tk, s.D, l.w_k, l.b_k, s.k_width(), l.format);
  const std::vector<T> v = project(l.x_kv, h.B * h.Tk, s.D, l.w_v, l.b_v, s.v_width(), l.format);
  // Pass 2: the heads split, attended, merged [B,Tq,H dv].
  const std::vector<T> q_h = split_heads(q, h.B, h.Tq, h.H, h.dk), k_h = split_heads(k, h.B, h.Tk, h.kv_heads(), h.dk),
                       v_h = split_heads(v, h.B, h.Tk, h.kv_heads(), h.dv);
  std::vector<T> heads(size_t(h.out_size()));
  attention(heads_problem(l, q_h.data(), k_h.data(), v_h.data()), Result<T>{heads.data(), r.weights});
  const std::vector<T> merged = merge_heads(heads, h.B, h.Tq, h.H, h.dv);
  // Pass 3: the output projection.
  const std::vector<T> out = project(merged.data(), h.B * h.Tq, s.merged_width(), l.w_o, l.b_o, s.D, l.format);
  std::copy(out.begin(), out.end(), r.out);
}

#define ATTNCHECK_INSTANTIATE(T)                                                                    \
  template std::vector<T> project(const T*, int64_t, int64_t, const T*, const T*, int64_t, Format); \
  template std::vector<T> split_heads(const std::vector<T>&, int64_t, int64_t, int64_t, int64_t);   \
  template std::vector<T> merge_heads(const std::vector<T>&, int64_t, int64_t, int64_t, int64_t);   \
  template Problem<T> heads_problem(const Layer<T>&, const T*, const T*, const T*);                 \
  template void mha_forward(const Layer<T>&, const LayerResult<T>&);
ATTNCHECK_INSTANTIATE(float)
ATTNCHECK_INSTANTIATE(double)
#undef ATTNCHECK_INSTANTIATE

}  // namespace attncheck
