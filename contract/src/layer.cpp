#include "attncheck/layer.hpp"

#include <algorithm>
#include <string>

namespace attncheck {

namespace {
// The widest D: as Shape's dims, so that no product of a layer's sizes overflows int64.
constexpr int64_t kMaxWidth = int64_t(1) << 31;
}  // namespace

template <class T>
std::string layer_error(const Layer<T>& l, const LayerResult<T>& r) {
  const LayerShape& s = l.shape;
  const Shape& h = s.heads;
  if (std::string e = shape_error(h); !e.empty()) return e;
  if (s.D < 1 || s.D > kMaxWidth) return "shape: D = " + std::to_string(s.D) + " is outside 1.." + std::to_string(kMaxWidth);
  const double widest = double(s.D) * double(std::max({s.q_width(), s.k_width(), s.v_width(), s.merged_width()}));
  const double inputs = double(s.D) * double(h.B) * double(std::max(h.Tq, h.Tk));
  if (widest > double(kMaxWidth) || inputs > double(kMaxWidth)) return "shape: a buffer would exceed 2^31 elements";
  if (!l.x_q || !l.x_kv || !l.w_q || !l.w_k || !l.w_v || !l.w_o || !r.out)
    return "a required buffer (x_q, x_kv, w_q, w_k, w_v, w_o or out) is null";
  if (l.x_kv == l.x_q && h.Tk != h.Tq) return "self-attention (x_kv is x_q) needs Tk = Tq";
  if (std::string e = masks_error(l.masks, h, l.scale); !e.empty()) return e;
  auto optional = [](const T* bias, int64_t n) { return bias ? n : 0; };
  return format_error<T>(l.format, {{"x_q", {l.x_q, s.x_q_size()}},
                                    {"x_kv", {l.x_kv, s.x_kv_size()}},
                                    {"w_q", {l.w_q, s.D * s.q_width()}},
                                    {"w_k", {l.w_k, s.D * s.k_width()}},
                                    {"w_v", {l.w_v, s.D * s.v_width()}},
                                    {"b_q", {l.b_q, optional(l.b_q, s.q_width())}},
                                    {"b_k", {l.b_k, optional(l.b_k, s.k_width())}},
                                    {"b_v", {l.b_v, optional(l.b_v, s.v_width())}},
                                    {"w_o", {l.w_o, s.merged_width() * s.D}},
                                    {"b_o", {l.b_o, optional(l.b_o, s.D)}}});
}

template std::string layer_error(const Layer<float>&, const LayerResult<float>&);
template std::string layer_error(const Layer<double>&, const LayerResult<double>&);

}  // namespace attncheck
