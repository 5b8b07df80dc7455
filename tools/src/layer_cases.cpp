#include "attncheck/layer_cases.hpp"

#include "attncheck/call_scalars.hpp"

#include "attncheck/call_schema.hpp"
#include "attncheck/features.hpp"

#include <cmath>
#include <type_traits>

namespace attncheck {

template <class T>
Layer<T> LayerCase<T>::layer() const {
  Layer<T> l;
  scalars_from_case(*this, l);
  auto view = [](auto& member, const auto& buffer) { member = buffer.empty() ? nullptr : buffer.data(); };
  for_each_input(l, *this, [&](const Slot&, auto& member, const auto& buffer) { view(member, buffer); });
  for_each_input_row([](const Slot&, auto, auto) {}, [&](const Slot&, auto in_layer) { view(in_layer(l), in_layer(*this)); });
  if (self_attention) l.x_kv = l.x_q;  // one pointer, as the ABI has it
  return l;
}

template <class T>
LayerCase<T> LayerCase<T>::as_cross_attention() const {
  LayerCase c = *this;
  if (c.self_attention) c.x_kv = c.x_q;
  c.self_attention = false;
  return c;
}

namespace {

// n standard normal values times `scale`, rounded to the format.
template <class T>
std::vector<T> normal(Chooser& choose, int64_t n, double scale, Format format) {
  std::vector<T> x(static_cast<size_t>(n));
  for (T& e : x) e = T(round_to(format, standard_normal(choose) * scale));
  return x;
}

// B, H, H_kv, Tq, Tk, dk, dv and D; self-attention or not; all within the domain.
template <class T>
void draw_shape(Chooser& choose, const CaseLimits& limits, LayerCase<T>& c) {
  Shape& s = c.shape.heads;
  const Domain& domain = limits.domain;
  const uint32_t can = limits.capabilities;
  s.B = std::min<int64_t>(1 + int64_t(choose.below(2)), limits.max_batch);
  // Up to 4 heads whatever the attention's max_heads, 4 before 3: 4 heads in 2 KV groups is the
  // smallest shape where a group read as h % H_kv differs from h / (H / H_kv).
  const int64_t most_heads = domain.limits.max_H > 0 ? domain.limits.max_H : 4;
  s.H = std::min(most_heads, std::max<int64_t>(limits.min_heads, (const int64_t[]){1, 2, 4, 3}[choose.below(4)]));
  s.H_kv = s.H;
  if ((can & ATTNCHECK_CAP_GQA) && s.H > 1 && choose.below(2) == 1) {
    std::vector<int64_t> groups;  // the KV head counts below H that divide it, largest first
    for (int64_t g = s.H / 2; g >= 1; --g)
      if (s.H % g == 0) groups.push_back(g);
    s.H_kv = groups[choose.below(groups.size())];
  }
  const Lengths most = longest(limits, std::min<int64_t>(limits.max_len, 8));
  c.self_attention = choose.below(3) != 0 || domain.only(ATTNCHECK_ONLY_SELF_ATTENTION);
  s.Tq = std::max<int64_t>(limits.min_len, 1 + int64_t(choose.below(uint64_t(most.q))));
  s.Tk = std::max<int64_t>(limits.min_len, 1 + int64_t(choose.below(uint64_t(most.k))));
  if (c.self_attention || domain.square()) s.Tk = s.Tq = std::min(s.Tq, most.k);
  // D = H dk, dk = dv: the usual layer (nn.MultiheadAttention's, and the only one under
  // ATTNCHECK_ONLY_LAYER_HEAD_WIDTH); else any widths and D.
  const bool usual = choose.below(3) != 0 || domain.only(ATTNCHECK_ONLY_LAYER_HEAD_WIDTH);
  const std::vector<int64_t> widths = drawable_widths(domain.limits, usual ? 4 : 6);
  s.dk = widths[choose.below(widths.size())];
  s.dv = widths[choose.below(widths.size())];
  if (usual || domain.only(ATTNCHECK_ONLY_EQUAL_HEAD_DIMS)) s.dv = s.dk;
  c.shape.D = usual ? s.H * s.dk : 1 + int64_t(choose.below(12));
}

// The masks the kernel claims, each absent at choice 0 (causal always, for a causal-only domain).
template <class T>
void draw_masks(Chooser& choose, const CaseLimits& limits, LayerCase<T>& c) {
  const Shape& s = c.shape.heads;
  const uint32_t can = limits.capabilities;
  const Domain& domain = limits.domain;
  if ((can & ATTNCHECK_CAP_ALLOW) && choose.below(3) == 1) {
    const uint64_t quarters = 1 + choose.below(4);
    c.allow.resize(size_t(s.allow_size()));
    for (uint8_t& a : c.allow) a = choose.below(4) < quarters ? 1 : 0;
    c.mix += ", allow mask";
  }
  if ((can & ATTNCHECK_CAP_KV_LENS) && choose.below(3) == 1) {
    c.key_lengths.resize(size_t(s.B));
    for (int32_t& length : c.key_lengths) length = int32_t(choose.below(uint64_t(s.Tk) + 1));
    c.mix += ", key lengths";
  }
  if ((can & ATTNCHECK_CAP_CAUSAL) && (choose.below(3) == 1 || !domain.causal_optional())) {
    c.causal = choose.below(2) == 1 ? Causal::upper_left : Causal::lower_right;
    if (!domain.takes(c.causal)) c.causal = c.causal == Causal::upper_left ? Causal::lower_right : Causal::upper_left;
    c.mix += ", causal";
  }
  if ((can & ATTNCHECK_CAP_WINDOW) && choose.below(4) == 1) {
    c.window_left = int64_t(choose.below(3)) - 1;
    c.window_right = int64_t(choose.below(3)) - 1;
    c.mix += ", window";
  }
}

}  // namespace

template <class T>
LayerCase<T> draw_layer_case(Chooser& choose, const CaseLimits& unclamped) {
  LayerCase<T> c;
  const uint32_t can = unclamped.capabilities;
  c.format = draw_format<T>(choose, can);
  const CaseLimits limits = clamped_to_domain(unclamped);
  draw_shape(choose, limits, c);
  const LayerShape& s = c.shape;
  const Shape& h = s.heads;
  const double spread = choose.below(4) == 3 ? 4 : 1;  // peaked softmaxes one time in four
  const double w_scale = spread / std::sqrt(double(s.D));
  c.x_q = normal<T>(choose, s.x_q_size(), 1, c.format);
  if (!c.self_attention) c.x_kv = normal<T>(choose, s.x_kv_size(), 1, c.format);
  c.w_q = normal<T>(choose, s.D * s.q_width(), w_scale, c.format);
  c.w_k = normal<T>(choose, s.D * s.k_width(), w_scale, c.format);
  c.w_v = normal<T>(choose, s.D * s.v_width(), 1 / std::sqrt(double(s.D)), c.format);
  c.w_o = normal<T>(choose, s.merged_width() * s.D, 1 / std::sqrt(double(s.merged_width())), c.format);
  // Biases: none (D2L), all four (nn.MultiheadAttention's bias=True), or each by a coin (not where
  // the domain takes all or none).
  const uint64_t biases = choose.below(limits.domain.only(ATTNCHECK_ONLY_LAYER_HEAD_WIDTH) ? 2 : 3);
  auto bias = [&](std::vector<T>& b, int64_t n) {
    if (biases == 1 || (biases == 2 && choose.below(2) == 1)) b = normal<T>(choose, n, 1, c.format);
  };
  bias(c.b_q, s.q_width());
  bias(c.b_k, s.k_width());
  bias(c.b_v, s.v_width());
  bias(c.b_o, s.D);
  c.mix = c.self_attention ? "self-attention" : "cross-attention";
  c.mix += biases == 0 ? ", bias-free" : biases == 1 ? ", biases" : ", some biases";
  if (h.kv_heads() != h.H) c.mix += ", grouped KV heads";
  draw_masks(choose, limits, c);
  if (choose.below(5) == 4 && !limits.domain.only(ATTNCHECK_ONLY_DEFAULT_SCALE)) c.scale = 0.5;
  return c;
}

template <class T>
std::string describe(const LayerCase<T>& c) {
  const LayerShape& s = c.shape;
  const Shape& h = s.heads;
  std::string text = "layer B " + std::to_string(h.B) + ", Tq " + std::to_string(h.Tq) + ", Tk " + std::to_string(h.Tk) + ", D " +
                     std::to_string(s.D) + ", H " + std::to_string(h.H) + ", H_kv " + std::to_string(h.kv_heads()) + ", dk " +
                     std::to_string(h.dk) + ", dv " + std::to_string(h.dv) + "; " + c.mix + "; scale " +
                     (c.scale == 0 ? std::string("1/sqrt(dk)") : show(c.scale)) + "; causal " + causal_name(c.causal) +
                     "; window " + std::to_string(c.window_left) + " " + std::to_string(c.window_right) + "; " +
                     format_name(c.format) + (c.empty_rows == EmptyRows::nan ? "; empty rows NaN" : "") + "\n";
  if (c.key_lengths.size())
    for (int64_t b = 0; b < h.B; ++b)
      text += "  key length of batch " + std::to_string(b) + ": " + std::to_string(c.key_lengths[size_t(b)]) + "\n";
  for (int64_t b = 0; b < h.B; ++b) {
    text += "  mask of batch " + std::to_string(b) + " (# may attend):\n";
    for (int64_t i = 0; i < h.Tq; ++i) {
      text += "    ";
      for (int64_t j = 0; j < h.Tk; ++j) text += c.permits(b, i, j) ? '#' : '.';
      text += "\n";
    }
  }
  return text;
}

template struct LayerCase<float>;
template struct LayerCase<double>;
template LayerCase<float> draw_layer_case(Chooser&, const CaseLimits&);
template LayerCase<double> draw_layer_case(Chooser&, const CaseLimits&);
template std::string describe(const LayerCase<float>&);
template std::string describe(const LayerCase<double>&);

}  // namespace attncheck
