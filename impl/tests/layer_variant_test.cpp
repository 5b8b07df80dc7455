// The layer's variants (impl/variants/layer_variant.hpp) against the built-in layer, mha_forward:
// each correct variant agrees with it on a few fixed small layers (1e-5 relative in f32, 1e-12 in
// f64), and each planted bug differs from it by more than 1e-3 somewhere on the layer chosen for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "attncheck/mha.hpp"
#include "layer_variant.hpp"

namespace attncheck {
namespace {

// Deterministic values in [-amplitude, amplitude): fixed seed, no std distribution (theirs differ by library).
std::vector<double> values(int64_t n, uint64_t seed, double amplitude) {
  std::mt19937_64 rng(seed);
  std::vector<double> x(static_cast<size_t>(n));
  for (double& e : x) e = (double(rng() >> 11) * 0x1p-53 * 2 - 1) * amplitude;
  return x;
}

// One layer problem and its buffers, in T (each value rounded to `format` when it is a 2-byte one).
struct Options {
  bool self_attention = false;  // x_kv is x_q (then Tk must be Tq)
  bool biases = true;           // b_q, b_v, b_o (and b_k unless no_key_bias)
  bool no_key_bias = false;
  bool allow = false;        // an allow mask with one query of batch 1 forbidden every key
  bool key_lengths = false;  // kv_lens {Tk - 1, Tk - 2}
  Causal causal = Causal::none;
  int64_t window_left = -1, window_right = -1;
  Format format = Format::f32;
};

template <class T>
struct LayerCase {
  LayerShape shape;
  Options options;
  std::vector<T> x_q, x_kv, w_q, w_k, w_v, b_q, b_k, b_v, w_o, b_o;
  std::vector<uint8_t> allow;
  std::vector<int32_t> lens;

  LayerCase(Shape heads, int64_t D, Options o) : options(o) {
    options.format = std::is_same_v<T, double> ? Format::f64 : o.format;
    shape.heads = heads;
    shape.D = D;
    const LayerShape& s = shape;
    const Shape& h = s.heads;
    uint64_t seed = 11;
    auto fill = [&](int64_t n, double amplitude) {
      std::vector<T> x;
      for (double e : values(n, seed++, amplitude)) x.push_back(T(is_narrow(options.format) ? round_to(options.format, e) : e));
      return x;
    };
    x_q = fill(s.x_q_size(), 2);
    if (!o.self_attention) x_kv = fill(s.x_kv_size(), 2);
    w_q = fill(s.D * s.q_width(), 0.6);
    w_k = fill(s.D * s.k_width(), 0.6);
    w_v = fill(s.D * s.v_width(), 1);
    w_o = fill(s.merged_width() * s.D, 1);
    if (o.biases) {
      b_q = fill(s.q_width(), 1);
      if (!o.no_key_bias) b_k = fill(s.k_width(), 1);
      b_v = fill(s.v_width(), 1);
      b_o = fill(s.D, 1);
    }
    if (o.allow) {
      allow.resize(size_t(h.allow_size()));
      for (int64_t b = 0; b < h.B; ++b)
        for (int64_t i = 0; i < h.Tq; ++i)
          for (int64_t j = 0; j < h.Tk; ++j)
            allow[size_t(h.allow_at(b, i) + j)] = !(b == 1 && i == h.Tq - 1) && (b * 7 + i * 3 + j) % 4 != 0;
    }
    if (o.key_lengths) lens = {int32_t(h.Tk - 1), int32_t(h.Tk - 2)};
  }

  Layer<T> layer() const {
    Layer<T> l;
    l.shape = shape;
    l.x_q = x_q.data();
    l.x_kv = options.self_attention ? x_q.data() : x_kv.data();
    l.w_q = w_q.data();
    l.w_k = w_k.data();
    l.w_v = w_v.data();
    l.w_o = w_o.data();
    auto optional = [](const std::vector<T>& b) { return b.empty() ? nullptr : b.data(); };
    l.b_q = optional(b_q);
    l.b_k = optional(b_k);
    l.b_v = optional(b_v);
    l.b_o = optional(b_o);
    l.masks.allow = allow.empty() ? nullptr : allow.data();
    l.masks.key_lengths = lens.empty() ? nullptr : lens.data();
    l.masks.causal = options.causal;
    l.masks.window_left = options.window_left;
    l.masks.window_right = options.window_right;
    l.format = options.format;
    return l;
  }
};

std::string significant(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", x);
  return text;
}

template <class T>
struct Outputs {
  std::vector<T> out, weights;
};

// The built-in layer (variant null) or a variant's, with weights.
template <class T>
Outputs<T> run(const Layer<T>& l, const LayerVariant* variant, LayerMutation mutation = LayerMutation::none) {
  Outputs<T> o{std::vector<T>(size_t(l.shape.out_size()), T(-777)), std::vector<T>(size_t(l.shape.heads.scores_size()), T(-777))};
  const LayerResult<T> result{o.out.data(), o.weights.data()};
  EXPECT_EQ(layer_error(l, result), "");
  if (variant)
    mha_variant(l, result, *variant, mutation);
  else
    mha_forward(l, result);
  return o;
}

// The largest |a - b| / max(|b|, 1) over out and weights: relative error, absolute below magnitude 1
// (the weights, and outputs near 0 after the output projection's cancellation).
template <class T>
double largest_difference(const Outputs<T>& a, const Outputs<T>& b) {
  double worst = 0;
  auto compare = [&](const std::vector<T>& x, const std::vector<T>& y) {
    for (size_t n = 0; n < x.size(); ++n) {
      const double d = std::abs(double(x[n]) - double(y[n])) / std::max(std::abs(double(y[n])), 1.0);
      worst = std::max(worst, d != d ? HUGE_VAL : d);
    }
  };
  compare(a.out, b.out);
  compare(a.weights, b.weights);
  return worst;
}

// The fixed layers: cross-attention with biases and an allow mask (one row of batch 1 empty) and
// key lengths; self-attention, causal, without a key bias; GQA (H 4, H_kv 2) with a window; and a
// bias-free one (D2L's default).
const Shape kBase{2, 2, 3, 4, 3, 2};
constexpr int64_t kD = 6;
Options cross_options() {
  Options o;
  o.allow = o.key_lengths = true;
  return o;
}
Options self_options() {
  Options o;
  o.self_attention = o.no_key_bias = o.key_lengths = true;
  o.causal = Causal::lower_right;
  return o;
}
Options gqa_options() {
  Options o;
  o.allow = true;
  o.window_left = 2;
  o.window_right = 1;
  return o;
}
Shape self_shape() { return {2, 2, 3, 3, 3, 2}; }
Shape gqa_shape() { return {2, 4, 3, 4, 3, 2, 2}; }

template <class T>
std::vector<LayerCase<T>> fixed_layers(Format format = Precision<T>::format) {
  Options cross = cross_options(), self = self_options(), gqa = gqa_options(), bias_free;
  bias_free.biases = false;
  bias_free.allow = true;
  for (Options* o : {&cross, &self, &gqa, &bias_free}) o->format = format;
  return {LayerCase<T>(kBase, kD, cross), LayerCase<T>(self_shape(), kD, self), LayerCase<T>(gqa_shape(), kD, gqa),
          LayerCase<T>(kBase, kD, bias_free)};
}

template <class T>
void expect_correct_variants_agree(double tolerance, Format format = Precision<T>::format) {
  const std::vector<LayerCase<T>> layers = fixed_layers<T>(format);
  for (const NamedLayerVariant& named : correct_layer_variants())
    for (size_t n = 0; n < layers.size(); ++n) {
      const Layer<T> l = layers[n].layer();
      const Outputs<T> reference = run(l, nullptr), variant = run(l, &named.variant);
      const double difference = largest_difference(variant, reference);
      EXPECT_LE(difference, tolerance) << named.name << " on fixed layer " << n;
      ::testing::Test::RecordProperty(std::string(named.name) + "_layer" + std::to_string(n), significant(difference));
      // An empty row (the cross layer's last query of batch 1) gives weights 0 and head output 0:
      // out there is b_o, as the built-in layer has it.
      if (n == 0) {
        for (int64_t h = 0; h < l.shape.heads.H; ++h)
          for (int64_t j = 0; j < l.shape.heads.Tk; ++j)
            EXPECT_EQ(variant.weights[size_t(l.shape.heads.scores_at(1, h, 2) + j)], T(0)) << named.name;
      }
    }
}

TEST(LayerVariant, CorrectVariantsAgreeWithTheBuiltInLayerInF32) { expect_correct_variants_agree<float>(1e-5); }
TEST(LayerVariant, CorrectVariantsAgreeWithTheBuiltInLayerInF64) { expect_correct_variants_agree<double>(1e-12); }
// In f16 and bf16 (float over inputs the format holds, projections and head outputs rounded to it):
// a projection rounded the other way moves the result by about one of the format's units.
TEST(LayerVariant, CorrectVariantsAgreeWithTheBuiltInLayerInF16) { expect_correct_variants_agree<float>(2e-2, Format::f16); }
TEST(LayerVariant, CorrectVariantsAgreeWithTheBuiltInLayerInBf16) { expect_correct_variants_agree<float>(1e-1, Format::bf16); }

// Each planted bug, in the variant it lives in, on the layer that exposes it.
struct MutantCase {
  LayerMutation mutation;
  const char* name;
  int layer;  // fixed_layers' index: 0 cross (allow, key lengths, biases, D = H dk), 1 self, 2 GQA
};
const MutantCase kMutants[] = {
    {LayerMutation::heads_split_dk_major, "heads_split_dk_major", 0},
    {LayerMutation::heads_merged_untransposed, "heads_merged_untransposed", 0},
    {LayerMutation::w_q_transposed, "w_q_transposed", 0},  // D 6 = H dk: w_q square
    {LayerMutation::q_bias_dropped, "q_bias_dropped", 0},
    {LayerMutation::out_bias_dropped, "out_bias_dropped", 0},
    {LayerMutation::scale_from_d_model, "scale_from_d_model", 0},                      // 1/sqrt(6) for 1/sqrt(3)
    {LayerMutation::padding_mask_polarity_of_mha, "padding_mask_polarity_of_mha", 0},  // kv_lens {3, 2}
    {LayerMutation::softmax_over_queries_in_columns, "softmax_over_queries_in_columns", 0},
    {LayerMutation::weights_averaged_over_heads, "weights_averaged_over_heads", 0},              // out right, weights not
    {LayerMutation::kv_heads_from_query_heads, "kv_heads_from_query_heads", 2},                  // H 4, H_kv 2
    {LayerMutation::self_attention_path_drops_padding, "self_attention_path_drops_padding", 1},  // self, key lengths
};

template <class T>
void expect_mutants_differ() {
  const std::vector<LayerCase<T>> layers = fixed_layers<T>();
  for (const MutantCase& m : kMutants) {
    const Layer<T> l = layers[size_t(m.layer)].layer();
    const LayerVariant home = layer_mutant_home(m.mutation);
    const double difference = largest_difference(run(l, &home, m.mutation), run(l, nullptr));
    EXPECT_GT(difference, 1e-3) << m.name;
    ::testing::Test::RecordProperty(m.name, significant(difference));
  }
}

TEST(LayerVariant, EveryMutantDiffersFromTheBuiltInLayerInF32) { expect_mutants_differ<float>(); }
TEST(LayerVariant, EveryMutantDiffersFromTheBuiltInLayerInF64) { expect_mutants_differ<double>(); }

TEST(LayerVariant, WeightsAveragedLeaveOutRight) {
  const std::vector<LayerCase<double>> layers = fixed_layers<double>();
  const Layer<double> l = layers[0].layer();
  const LayerVariant home = layer_mutant_home(LayerMutation::weights_averaged_over_heads);
  const Outputs<double> bug = run(l, &home, LayerMutation::weights_averaged_over_heads), reference = run(l, nullptr);
  EXPECT_EQ(bug.out, reference.out);
  EXPECT_NE(bug.weights, reference.weights);
}

// The head-reshape bug is invisible with one head; the GQA bug without grouped heads; w_q_transposed
// when w_q is not square (it then computes correctly).
TEST(LayerVariant, MutantsHiddenWhereTheyShouldBe) {
  Options o = cross_options();
  const LayerCase<double> one_head({2, 1, 3, 4, 3, 2}, kD, o), not_square({2, 2, 3, 4, 2, 2}, kD, o);
  const LayerVariant d2l = LayerVariant::d2l, builtin = LayerVariant::builtin;
  EXPECT_LE(largest_difference(run(one_head.layer(), &d2l, LayerMutation::heads_split_dk_major), run(one_head.layer(), nullptr)),
            1e-12);
  EXPECT_LE(
      largest_difference(run(not_square.layer(), &builtin, LayerMutation::w_q_transposed), run(not_square.layer(), nullptr)),
      1e-12);
  const LayerCase<double> mha(kBase, kD, o);
  EXPECT_LE(largest_difference(run(mha.layer(), &builtin, LayerMutation::kv_heads_from_query_heads), run(mha.layer(), nullptr)),
            1e-12);
}

TEST(LayerVariant, AStepOfAnotherVariantIsRefused) {
  const std::vector<LayerCase<double>> layers = fixed_layers<double>();
  const Layer<double> l = layers[0].layer();
  std::vector<double> out(size_t(l.shape.out_size()));
  EXPECT_THROW(mha_variant(l, LayerResult<double>{out.data()}, LayerVariant::packed_qkv, LayerMutation::heads_split_dk_major),
               std::invalid_argument);
  EXPECT_THROW(mha_variant(l, LayerResult<double>{out.data()}, LayerVariant::d2l, LayerMutation::softmax_over_queries_in_columns),
               std::invalid_argument);
}

}  // namespace
}  // namespace attncheck
