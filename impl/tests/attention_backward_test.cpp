// The built-in backward against central differences of the built-in forward; the backward variants
// against the built-in: the correct ones agree, every planted bug is caught on a small case built
// for it, a forbidden key's NaN never reaches a gradient, and f16 and bf16 gradients are values of
// their format.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attncheck/attention.hpp"
#include "attncheck/attention_backward.hpp"
#include "backward.hpp"

namespace attncheck {
namespace {

// Deterministic draws: fixed seeds, and no std distribution (theirs differ by library).
struct Rng {
  std::mt19937_64 engine;
  double uniform(double lo, double hi) { return lo + double(engine() >> 11) * 0x1p-53 * (hi - lo); }
  int64_t below(int64_t n) { return int64_t(engine() % uint64_t(n)); }
};

// What a case has besides its values: the shape, the masks' modes and which optional buffers exist.
struct Spec {
  Shape s;
  Causal causal = Causal::none;
  int64_t window_left = -1, window_right = -1;
  double softcap = 0;
  bool bias = false;         // values in [-1, 1), about one in 8 -inf
  bool allow = false;        // about one key in 4 disallowed, and row 0 of batch 0 fully (an empty row)
  bool key_lengths = false;  // lengths drawn from 1..Tk, but the last sequence's 0 when B > 1 (empty rows)
  EmptyRows empty_rows = EmptyRows::zero;
};

// One case: its problem's buffers, dout, and the built-in forward's out and lse. The problem's
// pointers are taken afresh by problem(), so a case may be copied and its values changed.
template <class T>
struct Case {
  Spec spec;
  Format format = Precision<T>::format;
  // Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], bias [B,H,Tq,Tk] or empty, dout [B,H,Tq,dv];
  // allow [B,Tq,Tk] and key_lengths [B] or empty; the forward's out [B,H,Tq,dv] and lse [B,H,Tq].
  std::vector<T> q, k, v, bias, dout;
  std::vector<uint8_t> allow;
  std::vector<int32_t> key_lengths;
  std::vector<T> out, lse;

  Problem<T> problem() const {
    Problem<T> p;
    p.shape = spec.s;
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.bias = bias.empty() ? nullptr : bias.data();
    p.masks = {allow.empty() ? nullptr : allow.data(), spec.causal, key_lengths.empty() ? nullptr : key_lengths.data(),
               spec.window_left, spec.window_right};
    p.softcap = spec.softcap;
    p.empty_rows = spec.empty_rows;
    p.format = format;
    return p;
  }

  // out and lse of the current values, by the built-in forward (out rounded to the format by it).
  void forward() {
    out.assign(size_t(spec.s.out_size()), 0);
    lse.assign(size_t(spec.s.lse_size()), 0);
    attention(problem(), Result<T>{out.data(), nullptr, lse.data()});
  }
};

// A case of `spec` with values drawn from `seed`, every value one of `format`'s, and its forward.
template <class T>
Case<T> make_case(const Spec& spec, uint64_t seed, Format format = Precision<T>::format) {
  const Shape& s = spec.s;
  Rng rng{std::mt19937_64(seed)};
  Case<T> c;
  c.spec = spec;
  c.format = format;
  auto draw = [&](int64_t n) {
    std::vector<T> x(static_cast<size_t>(n));
    for (T& e : x) e = T(round_to(format, rng.uniform(-1, 1)));
    return x;
  };
  c.q = draw(s.q_size());
  c.k = draw(s.k_size());
  c.v = draw(s.v_size());
  c.dout = draw(s.out_size());
  if (spec.bias) {
    c.bias = draw(s.scores_size());
    for (T& e : c.bias)
      if (rng.below(8) == 0) e = -std::numeric_limits<T>::infinity();
  }
  if (spec.allow) {
    c.allow.resize(size_t(s.allow_size()));
    for (uint8_t& e : c.allow) e = rng.below(4) != 0;
    std::fill_n(c.allow.begin() + s.allow_at(0, 0), s.Tk, uint8_t(0));
  }
  if (spec.key_lengths) {
    c.key_lengths.resize(size_t(s.B));
    for (int32_t& e : c.key_lengths) e = int32_t(1 + rng.below(s.Tk));
    if (s.B > 1) c.key_lengths.back() = 0;
  }
  c.forward();
  return c;
}

// A small random spec: B 1-2, H 2 over H_kv 1 or 2, Tq and Tk 1-6, dk 2-4 and dv != dk, a random
// causal mode; `features`' bits choose a soft-cap of 5, a bias, a window (each side unbounded or 1-3
// keys: a side of 0 often leaves one key, whose row then has dq = 0), an allow mask, key lengths.
Spec small_spec(Rng& rng, unsigned features) {
  Spec spec;
  const int64_t dk = 2 + rng.below(3);
  spec.s = {.B = 1 + rng.below(2),
            .H = 2,
            .Tq = 1 + rng.below(6),
            .Tk = 1 + rng.below(6),
            .dk = dk,
            .dv = dk + 1 + rng.below(2),
            .H_kv = 1 + rng.below(2)};
  spec.causal = Causal(rng.below(3));
  spec.softcap = features & 1 ? 5 : 0;
  spec.bias = features & 2;
  if (features & 4) {
    auto side = [&rng] {
      const int64_t keys = rng.below(4);
      return keys == 0 ? int64_t(-1) : keys;
    };
    spec.window_left = side();
    spec.window_right = side();
  }
  spec.allow = features & 8;
  spec.key_lengths = features & 16;
  return spec;
}

// The gradients a backward writes: dq [B,H,Tq,dk], dk [B,H_kv,Tk,dk], dv [B,H_kv,Tk,dv].
template <class T>
struct Gradients {
  std::vector<T> dq, dk, dv;
};

// The gradients of a case by `backward`, into buffers filled with NaN, so that an element it does
// not write shows.
template <class T, class Backward>
Gradients<T> gradients(const Case<T>& c, Backward backward) {
  const Shape& s = c.spec.s;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  Gradients<T> d{std::vector<T>(size_t(s.q_size()), nan), std::vector<T>(size_t(s.k_size()), nan),
                 std::vector<T>(size_t(s.v_size()), nan)};
  backward(c.problem(), Grads<T>{c.out.data(), c.lse.data(), c.dout.data(), d.dq.data(), d.dk.data(), d.dv.data()});
  return d;
}

template <class T>
Gradients<T> builtin(const Case<T>& c) {
  return gradients(c, [](const Problem<T>& p, const Grads<T>& g) { attention_backward(p, g); });
}

template <class T>
Gradients<T> variant(const Case<T>& c, const BackwardVariant& v) {
  return gradients(c, [&v](const Problem<T>& p, const Grads<T>& g) { variant_backward(p, g, v); });
}

// The largest |a - b| over the largest |b|, or over 1 when every |b| is smaller: inputs are of size
// about 1, and a gradient near 0 is a difference of terms of that size (dP_ij - D_i, or sums of
// p_ij dP_ij) whose rounding errors it keeps, so no entrywise relative error is meaningful. Equal
// infinities count as equal; NaN when either holds a NaN, since no gradient here may be one.
template <class T>
double relative_difference(const std::vector<T>& a, const std::vector<T>& b) {
  double difference = 0, largest = 1;
  for (size_t n = 0; n < b.size(); ++n) {
    const double a_n = double(a[n]), b_n = double(b[n]);
    if (std::isnan(a_n) || std::isnan(b_n)) return std::numeric_limits<double>::quiet_NaN();
    difference = std::max(difference, a_n == b_n ? 0 : std::abs(a_n - b_n));
    largest = std::max(largest, std::abs(b_n));
  }
  return difference / largest;
}

// The largest relative difference of the three gradients.
template <class T>
double relative_difference(const Gradients<T>& a, const Gradients<T>& b) {
  const double dq = relative_difference(a.dq, b.dq), dk = relative_difference(a.dk, b.dk), dv = relative_difference(a.dv, b.dv);
  if (std::isnan(dq) || std::isnan(dk) || std::isnan(dv)) return std::numeric_limits<double>::quiet_NaN();
  return std::max({dq, dk, dv});
}

// The case's features, for failure messages.
std::string describe(const Spec& spec) {
  const Shape& s = spec.s;
  return "B " + std::to_string(s.B) + " H " + std::to_string(s.H) + " H_kv " + std::to_string(s.kv_heads()) + " Tq " +
         std::to_string(s.Tq) + " Tk " + std::to_string(s.Tk) + " dk " + std::to_string(s.dk) + " dv " + std::to_string(s.dv) +
         " causal " + std::to_string(int(spec.causal)) + " window " + std::to_string(spec.window_left) + "," +
         std::to_string(spec.window_right) + " softcap " + std::to_string(spec.softcap) + (spec.bias ? " bias" : "") +
         (spec.allow ? " allow" : "") + (spec.key_lengths ? " key_lengths" : "") +
         (spec.empty_rows == EmptyRows::nan ? " nan_rows" : "");
}

// Whether some row of the case gives weight to two keys or more, by the forward's weights [B,H,Tq,Tk].
template <class T>
bool some_row_sees_two_keys(const Case<T>& c) {
  const Shape& s = c.spec.s;
  std::vector<T> out(size_t(s.out_size())), weights(size_t(s.scores_size()));
  attention(c.problem(), Result<T>{out.data(), weights.data()});
  for (int64_t row = 0; row < s.B * s.H * s.Tq; ++row)
    if (std::count_if(weights.begin() + row * s.Tk, weights.begin() + (row + 1) * s.Tk, [](T w) { return w > 0; }) >= 2)
      return true;
  return false;
}

// (a) dq, dk, dv are the derivatives of L = sum(out * dout): central differences of the forward,
// step 1e-6, on every combination of the features; each case redrawn until some row sees two keys,
// since a row with one key has dq = 0 and gives dk = 0, and a comparison of zeros shows nothing.
TEST(AttentionBackward, MatchesCentralDifferencesOfTheForward) {
  Rng rng{std::mt19937_64(11)};
  uint64_t seed = 100;
  for (unsigned features = 0; features < 32; ++features) {
    Case<double> c;
    do c = make_case<double>(small_spec(rng, features), seed++);
    while (!some_row_sees_two_keys(c));
    SCOPED_TRACE(describe(c.spec));
    const Gradients<double> analytic = builtin(c);

    // L with entry `at` of x moved by delta.
    auto loss = [&c](std::vector<double>& x, size_t at, double delta) {
      const double kept = x[at];
      x[at] = kept + delta;
      std::vector<double> out(size_t(c.spec.s.out_size()));
      attention(c.problem(), Result<double>{out.data()});
      x[at] = kept;
      double L = 0;
      for (size_t n = 0; n < out.size(); ++n) L += out[n] * c.dout[n];
      return L;
    };
    auto central = [&](std::vector<double>& x) {
      const double step = 1e-6;
      std::vector<double> dx(x.size());
      for (size_t at = 0; at < x.size(); ++at) dx[at] = (loss(x, at, step) - loss(x, at, -step)) / (2 * step);
      return dx;
    };
    EXPECT_LE(relative_difference(analytic.dq, central(c.q)), 1e-6) << "dq";
    EXPECT_LE(relative_difference(analytic.dk, central(c.k)), 1e-6) << "dk";
    EXPECT_LE(relative_difference(analytic.dv, central(c.v)), 1e-6) << "dv";
  }
}

// Cases for the variants: empty rows (an allow mask's, key length 0, a window's, under both
// policies), GQA groups of 2 and 3, windows, soft-caps, a bias, and a case over several key tiles
// of 64 and query tiles of 128; then small random ones.
std::vector<Spec> variant_specs() {
  std::vector<Spec> specs = {
      {.s = {.B = 2, .H = 2, .Tq = 5, .Tk = 6, .dk = 3, .dv = 4, .H_kv = 1},
       .causal = Causal::lower_right,
       .softcap = 5,
       .bias = true,
       .allow = true},
      {.s = {.B = 2, .H = 3, .Tq = 4, .Tk = 5, .dk = 4, .dv = 2, .H_kv = 1},
       .window_left = 1,
       .window_right = 0,
       .key_lengths = true},
      {.s = {.B = 1, .H = 6, .Tq = 6, .Tk = 4, .dk = 2, .dv = 3, .H_kv = 2},
       .causal = Causal::upper_left,
       .softcap = 5,
       .allow = true,
       .empty_rows = EmptyRows::nan},
      {.s = {.B = 1, .H = 4, .Tq = 7, .Tk = 4, .dk = 3, .dv = 5, .H_kv = 2},
       .window_left = 0,
       .window_right = 0,
       .softcap = 5,
       .bias = true},
      {.s = {.B = 1, .H = 4, .Tq = 7, .Tk = 4, .dk = 3, .dv = 5, .H_kv = 2},
       .window_left = 1,
       .window_right = 0,
       .allow = true,
       .empty_rows = EmptyRows::nan},
      {.s = {.B = 1, .H = 2, .Tq = 140, .Tk = 150, .dk = 4, .dv = 3, .H_kv = 1},
       .causal = Causal::lower_right,
       .softcap = 5,
       .bias = true},
      {.s = {.B = 1, .H = 3, .Tq = 130, .Tk = 70, .dk = 3, .dv = 2, .H_kv = 1},
       .window_left = 40,
       .window_right = 20,
       .allow = true},
      {.s = {.B = 1, .H = 1, .Tq = 1, .Tk = 1, .dk = 1, .dv = 1}},
  };
  Rng rng{std::mt19937_64(12)};
  for (unsigned features = 0; features < 32; ++features) specs.push_back(small_spec(rng, features));
  return specs;
}

// (b) Every correct variant gives the built-in's gradients, to 1e-4 in float and 1e-10 in double.
template <class T>
void correct_variants_agree(double tolerance) {
  uint64_t seed = 200;
  for (const Spec& spec : variant_specs()) {
    const Case<T> c = make_case<T>(spec, seed++);
    SCOPED_TRACE(describe(spec));
    const Gradients<T> reference = builtin(c);
    for (const NamedBackward& named : correct_backward_variants())
      EXPECT_LE(relative_difference(variant(c, named.variant), reference), tolerance) << named.name;
  }
}

TEST(AttentionBackward, CorrectVariantsAgreeInFloat) { correct_variants_agree<float>(1e-4); }
TEST(AttentionBackward, CorrectVariantsAgreeInDouble) { correct_variants_agree<double>(1e-10); }

// (c) Every planted bug, on a small case that has what it gets wrong, moves some gradient by more
// than 1e-3 in double.
TEST(AttentionBackward, EveryMutantDiffersOnItsCase) {
  using BM = BackwardMutation;
  const Shape square{.B = 1, .H = 2, .Tq = 4, .Tk = 4, .dk = 4, .dv = 3};
  struct Designed {
    BM mutation;
    Spec spec;
  };
  const Designed designed[] = {
      {BM::p_not_zeroed_at_masked, {.s = square, .causal = Causal::upper_left}},
      {BM::dkdv_not_summed_over_group, {.s = {.B = 1, .H = 2, .Tq = 3, .Tk = 4, .dk = 4, .dv = 3, .H_kv = 1}}},
      {BM::causal_upper_left_in_backward,
       {.s = {.B = 1, .H = 1, .Tq = 2, .Tk = 4, .dk = 4, .dv = 3}, .causal = Causal::lower_right}},
      {BM::softcap_derivative_missing, {.s = square, .softcap = 1}},
      {BM::dk_scale_missing, {.s = square}},
      {BM::d_from_other_output, {.s = square}},
      {BM::dv_indexed_with_dk, {.s = square}},                                                // dk > dv: wrapped
      {BM::dv_indexed_with_dk, {.s = {.B = 1, .H = 1, .Tq = 3, .Tk = 4, .dk = 2, .dv = 5}}},  // dk < dv
      {BM::always_causal, {.s = square}},
  };
  for (const Designed& d : designed) {
    const Case<double> c = make_case<double>(d.spec, 300);
    SCOPED_TRACE(describe(d.spec));
    EXPECT_GT(relative_difference(variant(c, backward_mutant(d.mutation)), builtin(c)), 1e-3) << "mutation " << int(d.mutation);
  }
}

// (d) NaN in the k and v of forbidden keys (padding, a disallowed key, a key every bias entry
// forbids) changes no gradient of the built-in or a correct variant, and such keys get dk = dv = 0.
template <class T>
void forbidden_nan_does_not_leak() {
  const Spec spec{.s = {.B = 2, .H = 2, .Tq = 4, .Tk = 6, .dk = 3, .dv = 2, .H_kv = 1},
                  .causal = Causal::lower_right,
                  .softcap = 5,
                  .bias = true,
                  .allow = true,
                  .key_lengths = true};
  Case<T> clean = make_case<T>(spec, 400);
  const Shape& s = spec.s;
  // Batch 0: key 1 disallowed, keys 4 and 5 padding; batch 1: key 2 forbidden by the bias, key 5 padding.
  clean.key_lengths = {4, 5};
  std::fill(clean.allow.begin(), clean.allow.end(), uint8_t(1));
  for (int64_t i = 0; i < s.Tq; ++i) clean.allow[size_t(s.allow_at(0, i) + 1)] = 0;
  const T minus_inf = -std::numeric_limits<T>::infinity();
  for (int64_t h = 0; h < s.H; ++h)
    for (int64_t i = 0; i < s.Tq; ++i) clean.bias[size_t(s.scores_at(1, h, i) + 2)] = minus_inf;
  clean.forward();
  const std::vector<std::pair<int64_t, int64_t>> forbidden = {{0, 1}, {0, 4}, {0, 5}, {1, 2}, {1, 5}};

  Case<T> poisoned = clean;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (auto [b, j] : forbidden) {
    std::fill_n(poisoned.k.begin() + s.k_at(b, 0, j), s.dk, nan);
    std::fill_n(poisoned.v.begin() + s.v_at(b, 0, j), s.dv, nan);
  }
  poisoned.forward();

  auto check = [&](const char* name, const Gradients<T>& with_nan, const Gradients<T>& without) {
    EXPECT_EQ(with_nan.dq, without.dq) << name;
    EXPECT_EQ(with_nan.dk, without.dk) << name;
    EXPECT_EQ(with_nan.dv, without.dv) << name;
    for (auto [b, j] : forbidden) {
      for (int64_t c = 0; c < s.dk; ++c) EXPECT_EQ(with_nan.dk[size_t(s.k_at(b, 0, j) + c)], T(0)) << name;
      for (int64_t c = 0; c < s.dv; ++c) EXPECT_EQ(with_nan.dv[size_t(s.v_at(b, 0, j) + c)], T(0)) << name;
    }
  };
  check("built-in", builtin(poisoned), builtin(clean));
  for (const NamedBackward& named : correct_backward_variants())
    check(named.name, variant(poisoned, named.variant), variant(clean, named.variant));
}

TEST(AttentionBackward, ForbiddenNanDoesNotLeakInFloat) { forbidden_nan_does_not_leak<float>(); }
TEST(AttentionBackward, ForbiddenNanDoesNotLeakInDouble) { forbidden_nan_does_not_leak<double>(); }

// (e) In f16 and bf16 problems every gradient of the built-in and of the correct variants is a
// value of the format; and rounded_backward's rounding of P and dT before their products is real.
TEST(AttentionBackward, NarrowFormatsGiveValuesOfTheFormat) {
  const Spec spec{.s = {.B = 2, .H = 4, .Tq = 9, .Tk = 17, .dk = 5, .dv = 3, .H_kv = 2},
                  .causal = Causal::lower_right,
                  .window_left = 6,
                  .softcap = 5,
                  .bias = true,
                  .allow = true};
  for (Format format : {Format::f16, Format::bf16})
    visit_narrow(format, [&](auto zero) {
      using F = decltype(zero);
      SCOPED_TRACE(Precision<F>::name);
      const Case<float> c = make_case<float>(spec, 500, format);
      // Every gradient a value of F and none NaN (all_in_format lets NaN pass, and the buffers start NaN).
      auto in_format = [](const Gradients<float>& d) {
        for (const std::vector<float>* x : {&d.dq, &d.dk, &d.dv})
          if (!all_in_format<F>(x->data(), int64_t(x->size())) ||
              std::any_of(x->begin(), x->end(), [](float e) { return std::isnan(e); }))
            return false;
        return true;
      };
      EXPECT_TRUE(in_format(builtin(c))) << "built-in";
      for (const NamedBackward& named : correct_backward_variants())
        EXPECT_TRUE(in_format(variant(c, named.variant))) << named.name;

      BackwardVariant flash, rounded;
      for (const NamedBackward& named : correct_backward_variants()) {
        if (std::string(named.name) == "flash_backward") flash = named.variant;
        if (std::string(named.name) == "rounded_backward") rounded = named.variant;
      }
      EXPECT_GT(relative_difference(variant(c, rounded), variant(c, flash)), 0);
    });
}

}  // namespace
}  // namespace attncheck
