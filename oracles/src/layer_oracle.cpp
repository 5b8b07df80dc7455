// The layer's reference and bound, pass by pass; the names follow docs/error-bound.md, "The layer".
#include "attncheck/layer_oracle.hpp"

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "attncheck/bound.hpp"

namespace attncheck {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The unit roundoff of the oracle's long double sums.
constexpr long double kLongU = LDBL_EPSILON / 2;

// One projection y = x w + b [rows,cols] (x [rows,D], w [D,cols], b [cols] or null): near, the exact
// value rounded to the layer's format (what the heads' oracle computes from), and error, a bound on
// |y~ - near| for the y~ of any correct kernel: its own dot product (gamma_{D+1} of the sizes, and
// underflow), its rounding to a 2-byte format, the distance from the exact y to near, and the
// oracle's long double sum.
template <class T>
struct Projection {
  std::vector<T> near;
  std::vector<double> error;
};

template <class T>
Projection<T> projection(const T* x, int64_t rows, int64_t D, const T* w, const T* b, int64_t cols, const Arithmetic& a,
                         Format format) {
  Projection<T> y{std::vector<T>(size_t(rows * cols)), std::vector<double>(size_t(rows * cols))};
  const double g_kernel = gamma(double(D + 1), a.u);
  const long double g_oracle = (long double)(D + 1) * kLongU / (1 - (long double)(D + 1) * kLongU);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      long double exact = b ? (long double)b[c] : 0, size = b ? std::fabs((long double)b[c]) : 0;
      for (int64_t k = 0; k < D; ++k) {
        const long double term = (long double)x[r * D + k] * (long double)w[k * cols + c];
        exact += term;
        size += std::fabs(term);
      }
      const size_t at = size_t(r * cols + c);
      if (!std::isfinite(double(size))) {
        y.near[at] = T(NAN);
        y.error[at] = kInf;
        continue;
      }
      y.near[at] = T(round_to(format, double(exact)));
      const double kernel = g_kernel * double(size) + double(2 * D + 2) * a.tiny;
      const double stored = a.storage_u * (std::fabs(double(exact)) + kernel) + a.storage_subnormal / 2;
      const double distance = double(std::fabs(exact - (long double)y.near[at]) + 2 * g_oracle * size);
      y.error[at] = inflate(kernel + stored + distance, 4);
    }
  return y;
}

// y [B,length,n d] as heads [B,n,length,d]: head g is columns g d .. g d + d - 1.
template <class X>
std::vector<X> by_heads(const std::vector<X>& y, int64_t B, int64_t length, int64_t n, int64_t d) {
  std::vector<X> heads(y.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < length; ++t)
      for (int64_t g = 0; g < n; ++g)
        for (int64_t c = 0; c < d; ++c)
          heads[size_t(((b * n + g) * length + t) * d + c)] = y[size_t((b * length + t) * n * d + g * d + c)];
  return heads;
}

// The four projections of the layer, in the heads' layout: Q [B,H,Tq,dk], K [B,H_kv,Tk,dk],
// V [B,H_kv,Tk,dv], values and errors alike.
template <class T>
struct Projected {
  std::vector<T> q, k, v;
  std::vector<double> q_error, k_error, v_error;
};

template <class T>
Projected<T> projected(const Layer<T>& l, const Arithmetic& a) {
  const LayerShape& s = l.shape;
  const Shape& h = s.heads;
  const Projection<T> q = projection(l.x_q, h.B * h.Tq, s.D, l.w_q, l.b_q, s.q_width(), a, l.format);
  const Projection<T> k = projection(l.x_kv, h.B * h.Tk, s.D, l.w_k, l.b_k, s.k_width(), a, l.format);
  const Projection<T> v = projection(l.x_kv, h.B * h.Tk, s.D, l.w_v, l.b_v, s.v_width(), a, l.format);
  const int64_t H_kv = h.kv_heads();
  return {by_heads(q.near, h.B, h.Tq, h.H, h.dk),   by_heads(k.near, h.B, h.Tk, H_kv, h.dk),
          by_heads(v.near, h.B, h.Tk, H_kv, h.dv),  by_heads(q.error, h.B, h.Tq, h.H, h.dk),
          by_heads(k.error, h.B, h.Tk, H_kv, h.dk), by_heads(v.error, h.B, h.Tk, H_kv, h.dv)};
}

// The score errors the projections add to row (b, h, i), [Tk]: a kernel's score from q~ and k~
// within e_q and e_k of the oracle's q and k moves by at most c sum_k (e_q (|k| + e_k) + |q| e_k),
// and its own arithmetic on the larger magnitudes by gamma_{dk+5} of that, and its flushing by tiny
// max(1, c) per unit of sum e_q + sum e_k.
template <class T>
std::vector<double> score_errors(const Problem<T>& p, const Projected<T>& y, const Arithmetic& a, int64_t b, int64_t h,
                                 int64_t i) {
  const Shape& s = p.shape;
  const double c = std::fabs(effective_scale(s, p.scale)) * (1 + 0x1p-50);
  const double own = 1 + gamma(double(s.dk + 5), a.u);
  std::vector<double> error(size_t(s.Tk));
  const int64_t q_at = s.q_at(b, h, i);
  for (int64_t j = 0; j < s.Tk; ++j) {
    const int64_t k_at = s.k_at(b, h, j);
    double moved = 0, flushed = 0;
    for (int64_t x = 0; x < s.dk; ++x) {
      const double e_q = y.q_error[size_t(q_at + x)], e_k = y.k_error[size_t(k_at + x)];
      moved += e_q * (std::fabs(double(y.k[size_t(k_at + x)])) + e_k) + std::fabs(double(y.q[size_t(q_at + x)])) * e_k;
      flushed += e_q + e_k;
    }
    error[size_t(j)] = inflate(c * moved * own + std::max(1.0, c) * a.tiny * flushed, 2 * s.dk + 4);
  }
  return error;
}

// One head row's contribution: its output [dv] and its bound, the attention's plus the values'
// errors, which the computed weights (at most (p_j + A_j)(1 + 2 u_s) + the format's subnormal)
// carry into the output once and, to first order, into its arithmetic once more: 2 sum_j w_j e_v.
struct HeadRow {
  ExactRow row;
  std::vector<double> bound;  // [dv]
};

template <class T>
HeadRow head_row(const Problem<T>& p, const Projected<T>& y, const Arithmetic& a, int64_t b, int64_t h, int64_t i) {
  const Shape& s = p.shape;
  const std::vector<double> input = score_errors(p, y, a, b, h, i);
  HeadRow head{exact_row(p, b, h, i, input.data()), {}};
  head.bound = head.row.bound;
  const ExactRow& r = head.row;
  for (size_t n = 0; n < r.keys.size(); ++n) {
    const double w = (double(r.weights[n]) + r.weight_error[n]) * (1 + 2 * a.storage_u) + a.storage_subnormal;
    const int64_t v_at = s.v_at(b, h, r.keys[n]);
    for (int64_t c = 0; c < s.dv; ++c) head.bound[size_t(c)] += 2 * w * y.v_error[size_t(v_at + c)];
  }
  for (double& e : head.bound) e = inflate(e, 2 * int64_t(r.keys.size()) + 2);
  return head;
}

ExactTensor tensor(const char* name, std::vector<int64_t> dims, Format format, int64_t size) {
  ExactTensor t;
  t.name = name;
  t.dims = std::move(dims);
  t.format = format;
  t.exact.assign(size_t(size), 0);
  t.bound.assign(size_t(size), 0);
  return t;
}

}  // namespace

template <class T>
LayerReference layer_reference(const Layer<T>& l) {
  const LayerShape& s = l.shape;
  const Shape& h = s.heads;
  const Arithmetic a = Arithmetic::of(l.format);
  const Format weights_format = l.format == Format::f64 ? Format::f64 : Format::f32;
  LayerReference ref{tensor("out", {h.B, h.Tq, s.D}, l.format, s.out_size()),
                     tensor("weights", {h.B, h.H, h.Tq, h.Tk}, weights_format, h.scores_size())};

  // Pass 1: the projections and their errors, in the heads' layout.
  const Projected<T> y = projected(l, a);
  Problem<T> p;
  p.shape = h;
  p.q = y.q.data();
  p.k = y.k.data();
  p.v = y.v.data();
  p.masks = l.masks;
  p.scale = l.scale;
  p.empty_rows = l.empty_rows;
  p.format = l.format;

  // Pass 2: attention per head row; merged [B,Tq,H dv], the head outputs and their bounds; the weights.
  std::vector<long double> merged(size_t(h.B * h.Tq * s.merged_width()));
  std::vector<double> merged_bound(merged.size());
  for (int64_t b = 0; b < h.B; ++b)
    for (int64_t hh = 0; hh < h.H; ++hh)
      for (int64_t i = 0; i < h.Tq; ++i) {
        const HeadRow head = head_row(p, y, a, b, hh, i);
        const int64_t at = (b * h.Tq + i) * s.merged_width() + s.merged_col(hh);
        for (int64_t c = 0; c < h.dv; ++c) {
          merged[size_t(at + c)] = head.row.out[size_t(c)];
          merged_bound[size_t(at + c)] = head.bound[size_t(c)];
        }
        const int64_t w_at = h.scores_at(b, hh, i);
        const bool nan_row = head.row.empty && std::isnan(double(head.row.lse));
        for (int64_t j = 0; j < h.Tk; ++j) ref.weights.exact[size_t(w_at + j)] = nan_row ? NAN : 0;
        // A weight's bound: A_j, what underflow can lose (the forward's U with one value of 1, as
        // V = I makes it), and its rounding to a 2-byte format when it is held in one.
        const int64_t n_keys = int64_t(head.row.keys.size());
        const double underflow = 2 * (double(n_keys + 3) + 2 * double(n_keys)) * a.tiny;
        for (size_t n = 0; n < head.row.keys.size(); ++n) {
          const double p_j = double(head.row.weights[n]), A_j = head.row.weight_error[n];
          ref.weights.exact[size_t(w_at + head.row.keys[n])] = head.row.weights[n];
          ref.weights.bound[size_t(w_at + head.row.keys[n])] =
              inflate(A_j + underflow + a.storage_u * (p_j + A_j + underflow) + a.storage_subnormal / 2, 4);
        }
      }

  // Pass 3: out = merged w_o + b_o. A kernel's error: the merged heads' bounds through |w_o|, its own
  // dot product of H dv + 1 terms on the larger magnitudes and its underflow, the rounding to a
  // 2-byte format; and the oracle's long double sum.
  const int64_t M = s.merged_width();
  const double g_kernel = gamma(double(M + 1), a.u);
  const long double g_oracle = (long double)(M + 1) * kLongU / (1 - (long double)(M + 1) * kLongU);
  for (int64_t r = 0; r < h.B * h.Tq; ++r)
    for (int64_t d = 0; d < s.D; ++d) {
      long double exact = l.b_o ? (long double)l.b_o[d] : 0, size = std::fabs(exact);
      double carried = 0, magnitude = l.b_o ? std::fabs(double(l.b_o[d])) : 0;
      for (int64_t m = 0; m < M; ++m) {
        const long double w = l.w_o[m * s.D + d], term = merged[size_t(r * M + m)] * w;
        exact += term;
        size += std::fabs(term);
        if (w == 0) continue;  // an infinite head bound times 0 is no error
        carried += merged_bound[size_t(r * M + m)] * std::fabs(double(w));
        magnitude += (std::fabs(double(merged[size_t(r * M + m)])) + merged_bound[size_t(r * M + m)]) * std::fabs(double(w));
      }
      const double kernel = carried + g_kernel * magnitude + double(2 * M + 2) * a.tiny;
      const double stored = a.storage_u * (std::fabs(double(exact)) + kernel) + a.storage_subnormal / 2;
      const size_t at = size_t(r * s.D + d);
      ref.out.exact[at] = exact;
      ref.out.bound[at] = std::isfinite(double(size)) ? inflate(kernel + stored + double(2 * g_oracle * size), 2 * M + 4) : kInf;
    }
  // The precision gate's unit: the bound itself (the layer is judged by the rigorous gate alone).
  ref.out.natural = ref.out.bound;
  ref.weights.natural = ref.weights.bound;
  return ref;
}

template LayerReference layer_reference(const Layer<float>&);
template LayerReference layer_reference(const Layer<double>&);

}  // namespace attncheck
