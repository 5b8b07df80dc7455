#include "attncheck/cases.hpp"

#include "attncheck/abi.hpp"
#include "attncheck/call_scalars.hpp"
#include "attncheck/call_schema.hpp"
#include "attncheck/features.hpp"
#include "attncheck/precision.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace attncheck {
namespace {

// Adds a feature's name to what the case's mix says was drawn.
template <class T>
void mixed(Case<T>& c, uint32_t capability) {
  c.mix += ", " + std::string(feature(capability).name);
}

// How a tensor's values are drawn; the order is from simplest to hardest, so shrinking goes left.
enum class Values { ties, normal, wide, tiny, bits };
const char* const kValueNames[] = {"ties", "normal", "wide", "tiny", "bits"};

double uniform01(Chooser& choose) { return double(choose.below(uint64_t(1) << 53)) * 0x1p-53; }

template <class T>
T arbitrary_bits(Chooser& choose) {
  return Precision<T>::from_bits(typename Precision<T>::Bits(choose.below(std::numeric_limits<uint64_t>::max())));
}

template <class T>
T value(Chooser& choose, Values kind) {
  switch (kind) {
    case Values::ties:
      return T((const int[]){0, 1, -1, 2, -2}[choose.below(5)]);  // 0 the simplest
    case Values::normal:
      return T(standard_normal(choose));
    case Values::wide:
      return T(standard_normal(choose) * std::pow(10.0, double(choose.below(4))) * 4);
    case Values::tiny:
      return choose.below(2) ? T(standard_normal(choose) * 1e-30) : std::numeric_limits<T>::denorm_min() * T(choose.below(1000));
    case Values::bits:
      return arbitrary_bits<T>(choose);
  }
  return 0;
}

// The same kinds in a format F narrower than T (f16, bf16), as a double: tiny is F's own (the edge
// of its normal range, and its subnormals), bits are F's.
template <class F>
double narrow_value(Chooser& choose, Values kind) {
  using P = Precision<F>;
  switch (kind) {
    case Values::tiny: {
      const double smallest_subnormal = P::smallest_normal * std::ldexp(1.0, -P::fraction_bits);
      return round_to<F>(choose.below(2) ? standard_normal(choose) * P::smallest_normal * 16
                                         : smallest_subnormal * double(choose.below(1000)));
    }
    case Values::bits:
      return P::to_double(arbitrary_bits<F>(choose));
    default:
      return round_to<F>(double(value<double>(choose, kind)));
  }
}

// A value of `format` drawn as `kind`, in T (which holds every value of the format).
template <class T>
T value_in(Chooser& choose, Values kind, Format format) {
  if (!is_narrow(format)) return value<T>(choose, kind);
  return T(visit_narrow(format, [&](auto zero) { return narrow_value<decltype(zero)>(choose, kind); }));
}

// x [n] of the given kind in `format`; a large case's tensors from one seeded stream (their values
// do not shrink one by one; their shape and kind do).
template <class T>
void fill(Chooser& choose, std::vector<T>& x, size_t n, Values kind, bool large, Format format) {
  x.resize(n);
  if (!large) {
    for (T& e : x) e = value_in<T>(choose, kind, format);
    return;
  }
  SeededChooser seeded(choose.below(std::numeric_limits<uint64_t>::max()));
  for (T& e : x) e = value_in<T>(seeded, kind, format);
}

// The number of rungs of `ladder` at most `limit`.
template <size_t N>
uint64_t rungs(const int64_t (&ladder)[N], int64_t limit) {
  return uint64_t(std::upper_bound(ladder, ladder + N, limit) - ladder);
}

// A length from the ladder up to `limit`: a rung, or one in three between it and the next.
int64_t ladder_length(Chooser& choose, int64_t limit) {
  const uint64_t count = rungs(kLengthLadder, limit), at = choose.below(count);
  const int64_t rung = kLengthLadder[at], next = at + 1 < count ? kLengthLadder[at + 1] : rung;
  return choose.below(3) == 2 && next > rung + 1 ? rung + 1 + int64_t(choose.below(uint64_t(next - rung - 1))) : rung;
}

// The most of a length the domain takes (its limit, else `most`).
int64_t within(int64_t most, int64_t limit) { return limit > 0 ? std::min(most, limit) : most; }

// dk and dv of `widths` (dv = dk under ATTNCHECK_ONLY_EQUAL_HEAD_DIMS, and one time in four anyway:
// most real heads have it).
void draw_widths(Chooser& choose, const Domain& domain, const std::vector<int64_t>& widths, Shape& s) {
  s.dk = widths[choose.below(widths.size())];
  s.dv = widths[choose.below(widths.size())];
  if (choose.below(4) == 0 || domain.only(ATTNCHECK_ONLY_EQUAL_HEAD_DIMS)) s.dv = s.dk;
}

// A large shape: B and H 1 or 2 (within the limits); decoding (Tq 1 to 3) or a prefill (Tq from the ladder), Tk from
// the ladder (Tq itself for a square domain); widths from theirs that the domain takes, dk != dv as often as not;
// then within kLargeCaseWork.
void draw_large_shape(Chooser& choose, const CaseLimits& limits, Shape& s) {
  const Domain& domain = limits.domain;
  const int64_t top_heads = std::max(limits.min_heads, std::min<int64_t>(2, limits.max_heads));
  s.B = 1 + int64_t(choose.below(uint64_t(std::min<int64_t>(2, limits.max_batch))));
  s.H = limits.min_heads + int64_t(choose.below(uint64_t(top_heads - limits.min_heads + 1)));
  const bool decoding = choose.below(3) == 0 && !domain.square();
  const Lengths most = longest(limits, limits.ladder_len);
  s.Tq = std::max(limits.min_len,
                  decoding ? 1 + int64_t(choose.below(uint64_t(std::min<int64_t>(3, most.q)))) : ladder_length(choose, most.q));
  s.Tk = std::max(limits.min_len, ladder_length(choose, most.k));
  if (domain.square()) s.Tk = s.Tq;
  std::vector<int64_t> widths;
  for (int64_t w : kWidthLadder)
    if (w <= limits.ladder_width && domain.limits.takes_width(w)) widths.push_back(w);
  draw_widths(choose, domain, widths.empty() ? drawable_widths(domain.limits, limits.ladder_width) : widths, s);
  auto work = [&] { return s.B * s.H * s.Tq * s.Tk * (s.dk + s.dv); };
  auto shorter = [&](int64_t length) {
    return std::max(limits.min_len, *(std::lower_bound(std::begin(kLengthLadder), std::end(kLengthLadder), length) - 1));
  };
  for (int64_t* length : {&s.Tq, &s.Tk})
    while (work() > kLargeCaseWork && *length > limits.min_len) {
      *length = shorter(*length);
      if (domain.square()) s.Tq = s.Tk = *length;
    }
}

// A small shape: B, H, Tq and Tk uniform within the limits, dk and dv from the widths the domain takes.
void draw_small_shape(Chooser& choose, const CaseLimits& limits, Shape& s) {
  const Domain& domain = limits.domain;
  s.B = 1 + int64_t(choose.below(uint64_t(limits.max_batch)));
  s.H = limits.min_heads + int64_t(choose.below(uint64_t(limits.max_heads - limits.min_heads + 1)));
  const Lengths most = longest(limits, limits.max_len);
  s.Tq = limits.min_len + int64_t(choose.below(uint64_t(most.q - limits.min_len + 1)));
  s.Tk = limits.min_len + int64_t(choose.below(uint64_t(most.k - limits.min_len + 1)));
  // Square one time in four (self-attention, most real calls), always for a square domain.
  if ((choose.below(4) == 0 && s.Tq <= most.k) || domain.square()) s.Tk = s.Tq;
  draw_widths(choose, domain, drawable_widths(domain.limits, limits.max_width), s);
}

// The kinds of a case's values: q's and k's, and v's.
struct Kinds {
  Values qk, v;
};

// The kinds q and k's values and v's are drawn as, and q, k and v drawn of them; the case's mix
// names the kinds.
template <class T>
Kinds draw_values(Chooser& choose, Case<T>& c, bool large) {
  const Shape& s = c.shape;
  const auto qk_kind = Values(choose.below(5)), v_kind = Values(choose.below(5));
#ifdef ATTNCHECK_GENERATOR_REORDERED  // a test build only: kept regressions must not notice (cli/tests)
  fill(choose, c.v, size_t(s.v_size()), v_kind, large, c.format);
  fill(choose, c.k, size_t(s.k_size()), qk_kind, large, c.format);
  fill(choose, c.q, size_t(s.q_size()), qk_kind, large, c.format);
#else
  fill(choose, c.q, size_t(s.q_size()), qk_kind, large, c.format);
  fill(choose, c.k, size_t(s.k_size()), qk_kind, large, c.format);
  fill(choose, c.v, size_t(s.v_size()), v_kind, large, c.format);
#endif
  c.mix = std::string(large ? "large, " : "") + "qk " + kValueNames[int(qk_kind)] + ", v " + kValueNames[int(v_kind)];
  return {qk_kind, v_kind};
}

// A causal mode among those the domain takes, none first (it shrinks away). KV-end, where claimed,
// refines a lower-right draw by one more choice, so that a kernel without a KV cache draws what it
// always drew (and kept choices replay the same cases).
Causal draw_causal(Chooser& choose, const Domain& domain, uint32_t can) {
  std::vector<Causal> modes;
  for (Causal mode : {Causal::none, Causal::upper_left, Causal::lower_right})
    if (domain.takes(mode)) modes.push_back(mode);
  const Causal mode = modes[choose.below(modes.size())];
  const bool kv_end = mode == Causal::lower_right && (can & ATTNCHECK_CAP_KV_CACHE) && domain.takes(Causal::kv_end);
  return kv_end && choose.below(2) == 1 ? Causal::kv_end : mode;
}

// Extreme logits for the bias: the fp32 exp overflow edge, the common finite mask sentinels, -FLT_MAX.
template <class T>
T extreme_logit(Chooser& choose) {
  const T picks[] = {0,
                     1,
                     -88.7f,
                     88.7f,
                     100,
                     -100,
                     -1e4f,
                     1e4f,
                     -1e9f,
                     -std::numeric_limits<float>::max(),
                     -std::numeric_limits<T>::infinity()};
  return picks[choose.below(sizeof picks / sizeof picks[0])];
}

// The masks of a large case, as real batches have them: none, documents packed in one sequence
// (block-diagonal: a query sees the keys of its own document, queries aligned with the last Tq
// keys), or a random allow mask from one seed; key padding per batch, often at a tile edge.
template <class T>
void draw_large_masks(Chooser& choose, Case<T>& c, uint32_t can) {
  const Shape& s = c.shape;
  const uint64_t kind = can & ATTNCHECK_CAP_ALLOW ? choose.below(3) : 0;
  if (kind == 1) {
    c.allow.assign(size_t(s.allow_size()), 0);
    for (int64_t b = 0; b < s.B; ++b) {
      std::vector<int64_t> starts = {0};  // document starts among the keys
      for (uint64_t n = 1 + choose.below(4); n > 0; --n) starts.push_back(ladder_length(choose, s.Tk));
      std::sort(starts.begin(), starts.end());
      auto document = [&](int64_t j) { return std::upper_bound(starts.begin(), starts.end(), j) - starts.begin(); };
      for (int64_t i = 0; i < s.Tq; ++i)
        for (int64_t j = 0; j < s.Tk; ++j)
          c.allow[size_t(s.allow_at(b, i) + j)] = document(j) == document(std::max<int64_t>(0, i + s.Tk - s.Tq));
    }
    c.mix += ", documents";
  } else if (kind == 2) {
    c.allow.resize(size_t(s.allow_size()));
    const uint64_t quarters = choose.below(5);  // the allowed fraction, 0 to 4 quarters
    SeededChooser seeded(choose.below(std::numeric_limits<uint64_t>::max()));
    for (uint8_t& a : c.allow) a = seeded.below(4) < quarters ? 1 : 0;
    mixed(c, ATTNCHECK_CAP_ALLOW);
  }
  if ((can & ATTNCHECK_CAP_KV_LENS) && choose.below(3) == 0) {
    c.key_lengths.resize(size_t(s.B));
    for (int32_t& length : c.key_lengths)
      length = int32_t(choose.below(2) ? ladder_length(choose, s.Tk) : int64_t(choose.below(uint64_t(s.Tk) + 1)));
    mixed(c, ATTNCHECK_CAP_KV_LENS);
  }
}

// Grouped KV heads: H_kv KV heads of `group` query heads each, group sizes 2, 4 and 8 and, since
// real mappings break there, 3, 6 and 12; q, k and v drawn again for the new head counts, of the
// same kinds. A large case keeps its heads: with two, one KV head serves both (MQA). Choice 0 is
// "none", so that it shrinks away; a property that wants one head (max_heads 1) gets none.
template <class T>
void draw_kv_groups(Chooser& choose, Case<T>& c, const CaseLimits& limits, bool large, Kinds kinds) {
  Shape& s = c.shape;
  if (!(limits.capabilities & ATTNCHECK_CAP_GQA) || limits.max_heads < 2 || choose.below(4) != 3) return;
  if (large) {
    if (s.H == 2) s.H_kv = 1;
    c.k.resize(size_t(s.k_size()));  // the first head's keys and values serve both
    c.v.resize(size_t(s.v_size()));
  } else {
    // Within the domain's heads: the group sizes H_kv of them may have (none limits: every one).
    const int64_t most = limits.domain.limits.max_H > 0 ? limits.domain.limits.max_H : 36;
    s.H_kv = std::min<int64_t>(1 + int64_t(choose.below(3)), std::max<int64_t>(1, most / 2));
    std::vector<int64_t> groups;
    for (int64_t g : {2, 3, 4, 6, 8, 12})
      if (s.H_kv * g <= most) groups.push_back(g);
    s.H = s.H_kv * groups[choose.below(groups.size())];
    fill(choose, c.q, size_t(s.q_size()), kinds.qk, false, c.format);
    fill(choose, c.k, size_t(s.k_size()), kinds.qk, false, c.format);
    fill(choose, c.v, size_t(s.v_size()), kinds.v, false, c.format);
  }
  mixed(c, ATTNCHECK_CAP_GQA);
}

// The masks of a small case: an allow mask of a density from none to all, with some rows emptied
// outright; key lengths anywhere from 0 to Tk.
template <class T>
void draw_small_masks(Chooser& choose, Case<T>& c, uint32_t can) {
  const Shape& s = c.shape;
  if (const uint64_t density = can & ATTNCHECK_CAP_ALLOW ? choose.below(6) : 0; density > 0) {
    const uint64_t quarters = density - 1;  // the allowed fraction, 0 to 4 quarters
    c.allow.resize(size_t(s.allow_size()));
    for (uint8_t& a : c.allow) a = choose.below(4) < quarters ? 1 : 0;
    if (choose.below(3) == 0)
      std::fill_n(c.allow.begin() + s.allow_at(0, int64_t(choose.below(uint64_t(s.Tq)))), s.Tk, uint8_t(0));
    mixed(c, ATTNCHECK_CAP_ALLOW);
  }
  if ((can & ATTNCHECK_CAP_KV_LENS) && choose.below(3) == 0) {
    c.key_lengths.resize(size_t(s.B));
    for (int32_t& length : c.key_lengths) length = int32_t(choose.below(uint64_t(s.Tk) + 1));
    mixed(c, ATTNCHECK_CAP_KV_LENS);
  }
}

// A small case's bias: ALiBi one time in three, else standard normal values with one in four an extreme logit.
template <class T>
void draw_bias(Chooser& choose, Case<T>& c) {
  const Shape& s = c.shape;
  c.bias.resize(size_t(s.scores_size()));
  if (choose.below(3) == 2) {  // ALiBi: head h's slope 2^(-8 (h + 1) / H) times the distance to the diagonal
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t i = 0; i < s.Tq; ++i)
          for (int64_t j = 0; j < s.Tk; ++j)
            c.bias[size_t(s.scores_at(b, h, i) + j)] =
                T(-std::exp2(-8.0 * double(h + 1) / double(s.H)) * double(std::abs(i + s.Tk - s.Tq - j)));
    c.mix += ", ALiBi bias";
  } else {
    for (T& x : c.bias) x = choose.below(4) == 0 ? extreme_logit<T>(choose) : T(standard_normal(choose));
    mixed(c, ATTNCHECK_CAP_BIAS);
  }
}

// A small case's features beyond ABI v1, a window and a soft-cap: each takes choice 0 for "absent",
// so that they shrink away. A window alone clears the masks and bias drawn before it (the causal
// mode too where the domain has it optional), the mix cut back to the values' kinds (`values_mix`).
template <class T>
void draw_beyond_v1(Chooser& choose, Case<T>& c, uint32_t can, const Domain& domain, size_t values_mix) {
  const Shape& s = c.shape;
  if ((can & ATTNCHECK_CAP_WINDOW) && choose.below(4) == 3) {  // a window: 0, 1, small, past the length, one side only
    auto side = [&] { return (const int64_t[]){-1, 0, 1, 2, 3, 5, s.Tk + 2}[choose.below(7)]; };
    c.window_left = side();
    c.window_right = side();
    mixed(c, ATTNCHECK_CAP_WINDOW);
    if (choose.below(2) == 1) {  // half the time the window alone, as sliding-window models use it
      c.allow.clear();
      c.key_lengths.clear();
      c.bias.clear();
      if (domain.causal_optional()) c.causal = Causal::none;
      c.mix.resize(values_mix);
      if (s.kv_heads() != s.H) mixed(c, ATTNCHECK_CAP_GQA);
      c.mix += ", window alone";
    }
  }
  if ((can & ATTNCHECK_CAP_SOFTCAP) && choose.below(4) == 3) {  // caps that bite (1 to 5) and Gemma 2's (30, 50)
    c.softcap = (const double[]){1, 2, 5, 30, 50}[choose.below(5)];
    mixed(c, ATTNCHECK_CAP_SOFTCAP);
  }
}

// The bias, drawn in T, rounded to the case's format.
template <class T>
void round_bias(Case<T>& c) {
  if (is_narrow(c.format))
    for (T& x : c.bias) x = T(round_to(c.format, double(x)));
}

}  // namespace

Lengths longest(const CaseLimits& limits, int64_t most) {
  const Limits& l = limits.domain.limits;
  Lengths lengths{within(most, l.max_Tq), within(most, l.max_Tk)};
  if (limits.domain.square()) lengths.q = lengths.k = std::min(lengths.q, lengths.k);
  return lengths;
}

CaseLimits clamped_to_domain(CaseLimits limits) {
  const Limits& l = limits.domain.limits;
  limits.max_batch = within(limits.max_batch, l.max_B);
  limits.max_heads = within(limits.max_heads, l.max_H);
  limits.min_heads = std::min(limits.min_heads, limits.max_heads);
  const Lengths most = longest(limits, limits.max_len);
  limits.min_len = std::min({limits.min_len, most.q, most.k});
  return limits;
}

std::vector<int64_t> drawable_widths(const Limits& l, int64_t most) {
  std::vector<int64_t> widths = l.widths_up_to(most);
  if (!widths.empty()) return widths;
  if (!l.widths.empty()) return {*std::min_element(l.widths.begin(), l.widths.end())};
  return {std::max<int64_t>(1, l.width_multiple)};
}

template <class T>
Format draw_format(Chooser& choose, uint32_t can) {
  if (!std::is_same_v<T, float>) return Precision<T>::format;
  std::vector<Format> claimed;
  for (Format f : {Format::f32, Format::f16, Format::bf16})
    if (can & capability_of(f)) claimed.push_back(f);
  if (claimed.empty()) return Format::f32;
  return claimed.size() == 1 ? claimed[0] : claimed[choose.below(claimed.size())];
}

template Format draw_format<float>(Chooser&, uint32_t);
template Format draw_format<double>(Chooser&, uint32_t);

double standard_normal(Chooser& choose) {
  const double u1 = 1 - uniform01(choose), u2 = uniform01(choose);
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
}

template <class T>
Problem<T> Case<T>::problem() const {
  Problem<T> p;
  scalars_from_case(*this, p);
  for_each_input(p, *this, [](const Slot&, auto& view, const auto& buffer) { view = buffer.empty() ? nullptr : buffer.data(); });
  return p;
}

template <class T>
Case<T> draw_case(Chooser& choose, const CaseLimits& unclamped) {
  const CaseLimits limits = clamped_to_domain(unclamped);
  const Domain& domain = limits.domain;
  const uint32_t can = limits.capabilities;
  Case<T> c;
  c.format = draw_format<T>(choose, can);
  const bool large = limits.ladder_len > 0 && !limits.small_only && choose.below(3) == 2;
  if (large)
    draw_large_shape(choose, limits, c.shape);
  else
    draw_small_shape(choose, limits, c.shape);
  const Kinds kinds = draw_values(choose, c, large);
  const size_t values_mix = c.mix.size();  // what a window alone keeps of the mix
  if (can & ATTNCHECK_CAP_CAUSAL) c.causal = draw_causal(choose, domain, can);
  const bool explicit_scale = choose.below(4) == 0 && !domain.only(ATTNCHECK_ONLY_DEFAULT_SCALE);
  if (large) {
    draw_large_masks(choose, c, can);
    if (explicit_scale) c.scale = double(value<T>(choose, Values::normal));
    draw_kv_groups(choose, c, limits, true, kinds);
    round_bias(c);
    return c;
  }
  draw_small_masks(choose, c, can);
  draw_kv_groups(choose, c, limits, false, kinds);
  if ((can & ATTNCHECK_CAP_BIAS) && choose.below(3) == 0) draw_bias(choose, c);
  if (explicit_scale) c.scale = double(value<T>(choose, Values::normal));
  if (!limits.abi_only && choose.below(4) == 0) c.empty_rows = EmptyRows::nan;
  draw_beyond_v1(choose, c, can, domain, values_mix);
  round_bias(c);
  return c;
}

Case<float> flushed_subnormal_case() {
  Case<float> c;
  c.shape = {1, 1, 1, 2, 1, 1};
  c.q = {0x1.fffffcp-127f};
  c.k = {1e34f, 0};
  c.v = {1, 0};
  c.mix = "a subnormal q against a key of 1e34";
  return c;
}

template <class T>
Case<T> dense_twin(const Case<T>& c) {
  if (!c.shape.paged() && !c.shape.varlen) return c;
  TwinBuffers<T> twin;
  const Problem<T> dense = dense_of(c.problem(), twin);
  Case<T> r = c;
  r.shape = dense.shape;
  if (c.shape.paged()) r.k = std::move(twin.k), r.v = std::move(twin.v);
  if (c.shape.varlen) r.allow = std::move(twin.allow), r.causal = Causal::none, r.window_left = r.window_right = -1;
  r.block_table.clear();
  r.cu_seqlens_q.clear();
  r.cu_seqlens_k.clear();
  return r;
}

template <class T>
Case<T> slice(const Case<T>& paged, int64_t b, int64_t h) {
  // c's buffers [B,H,...], [B,H_kv,...] and [B,...] in; one (b, h) with its KV head out.
  const Case<T> c = dense_twin(paged);
  const Shape& s = c.shape;
  Case<T> one = c;
  one.shape.B = one.shape.H = 1;
  one.shape.H_kv = 0;
  auto take = [](const auto& x, int64_t start, int64_t count) {
    return std::decay_t<decltype(x)>(x.begin() + start, x.begin() + start + count);
  };
  one.q = take(c.q, s.q_at(b, h, 0), s.Tq * s.dk);
  one.k = take(c.k, s.k_at(b, h, 0), s.Tk * s.dk);
  one.v = take(c.v, s.v_at(b, h, 0), s.Tk * s.dv);
  if (!c.bias.empty()) one.bias = take(c.bias, s.scores_at(b, h, 0), s.Tq * s.Tk);
  if (!c.allow.empty()) one.allow = take(c.allow, s.allow_at(b, 0), s.Tq * s.Tk);
  if (!c.key_lengths.empty()) one.key_lengths = {c.key_lengths[size_t(b)]};
  if (!c.sinks.empty()) one.sinks = {c.sinks[size_t(h)]};
  return one;
}

std::string show(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", x);
  return text;
}

namespace {

// The permitted keys of c's rows (a grid, or a line per batch when large) and its values when few.
template <class T>
std::string masks_and_values(const Case<T>& c) {
  const Shape& s = c.shape;
  std::string text;
  const bool grid = s.Tq <= 64 && s.Tk <= 96;  // else a line per batch: a grid would not be read
  const bool unmasked =
      c.allow.empty() && c.key_lengths.empty() && c.causal == Causal::none && c.window_left < 0 && c.window_right < 0;
  if (unmasked) text += "  no mask: every query may attend to every key\n";
  for (int64_t b = 0; b < s.B && !unmasked; ++b) {
    if (!grid) {
      int64_t fewest = s.Tk, most = 0;
      for (int64_t i = 0; i < s.Tq; ++i) {
        int64_t count = 0;
        for (int64_t j = 0; j < s.Tk; ++j) count += c.permits(b, i, j);
        fewest = std::min(fewest, count);
        most = std::max(most, count);
      }
      text += "  batch " + std::to_string(b) + ": each query may attend to " + std::to_string(fewest) + " to " +
              std::to_string(most) + " keys\n";
      continue;
    }
    text += "  batch " + std::to_string(b) + " permitted keys (rows: queries):\n";
    for (int64_t i = 0; i < s.Tq; ++i) {
      text += "    ";
      for (int64_t j = 0; j < s.Tk; ++j) text += c.permits(b, i, j) ? '#' : '.';
      text += '\n';
    }
  }
  auto values = [&](const char* name, const std::vector<T>& x) {
    if (x.empty() || x.size() > 64) return;
    text += std::string("  ") + name + ":";
    for (T e : x) text += " " + show(double(e));
    text += '\n';
  };
  values("q", c.q);
  values("k", c.k);
  values("v", c.v);
  values("bias", c.bias);
  return text;
}

}  // namespace

template <class T>
std::string describe(const Case<T>& c) {
  // c: q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv], allow [B,Tq,Tk], key_lengths [B], bias [B,H,Tq,Tk].
  const Shape& s = c.shape;
  const std::string kv_heads = s.kv_heads() == s.H ? "" : ", H_kv " + std::to_string(s.kv_heads());
  char line[512];
  // The scale to 9 digits (show), not std::to_string's 6 decimals, which print 1e-7 as 0.000000.
  std::string extras;  // what ABI v1 cannot carry, when present
  if (c.window_left >= 0 || c.window_right >= 0)
    extras += "; window " + std::to_string(c.window_left) + "," + std::to_string(c.window_right);
  if (c.softcap != 0) extras += "; soft-cap " + show(c.softcap);
  if (c.dropout_p != 0) extras += "; dropout p " + show(c.dropout_p) + " seed " + std::to_string(c.dropout_seed);
  for (size_t h = 0; h < c.sinks.size(); ++h) extras += (h ? " " : "; sinks ") + show(c.sinks[h]);
  if (s.paged()) {  // the pool and, when short, the table (the k and v printed below are the pools)
    extras += "; paged: " + std::to_string(s.NB) + " blocks of " + std::to_string(s.BS) + " keys, table";
    for (size_t e = 0; e < c.block_table.size() && c.block_table.size() <= 24; ++e)
      extras += (e % size_t(s.BPS) ? " " : e ? " | " : " ") + std::to_string(c.block_table[e]);
  }
  if (s.varlen) {  // each sequence's first query and key rows (the grid below is its twin's: one batch)
    extras += "; varlen: cu_seqlens_q";
    for (const int32_t at : c.cu_seqlens_q) extras += " " + std::to_string(at);
    extras += ", cu_seqlens_k";
    for (const int32_t at : c.cu_seqlens_k) extras += " " + std::to_string(at);
  }
  if (is_narrow(c.format)) extras += std::string("; in ") + format_name(c.format);
  std::snprintf(
      line, sizeof line, "B %lld, H %lld%s, Tq %lld, Tk %lld, dk %lld, dv %lld; scale %s; causal %s%s; empty rows %s; %s\n",
      (long long)s.B, (long long)s.H, kv_heads.c_str(), (long long)s.Tq, (long long)s.Tk, (long long)s.dk, (long long)s.dv,
      c.scale == 0 ? "default" : show(c.scale).c_str(), causal_name(c.causal), extras.c_str(),
      (empty_rows_word(c.empty_rows) + std::string(c.lse_empty == LseEmpty::zero ? ", their lse 0" : "")).c_str(), c.mix.c_str());
  std::string text = line;
  return text + masks_and_values(c.shape.varlen ? dense_twin(c) : c);  // varlen: its sequences' mask over the packed rows
}

template <class T>
std::string describe_row(const Case<T>& paged, int64_t b, int64_t h, int64_t i) {
  // c's q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv], bias [B,H,Tq,Tk]: row (b, h, i)'s inputs.
  const Case<T> c = dense_twin(paged);  // its keys as the row reads them
  const Shape& s = c.shape;
  auto vector = [](const T* x, int64_t n) {
    std::string text = "(";
    for (int64_t d = 0; d < std::min<int64_t>(n, 16); ++d) text += (d ? " " : "") + show(double(x[d]));
    return text + (n > 16 ? " ... " + std::to_string(n - 16) + " more)" : ")");
  };
  std::string text = "  row [" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) +
                     "]: q = " + vector(c.q.data() + s.q_at(b, h, i), s.dk) + "\n";
  int64_t shown = 0, permitted = 0;
  for (int64_t j = 0; j < s.Tk; ++j) {
    if (!c.permits(b, i, j)) continue;
    if (++permitted > 16) continue;
    ++shown;
    text += "    key " + std::to_string(j) + ": k = " + vector(c.k.data() + s.k_at(b, h, j), s.dk) +
            ", v = " + vector(c.v.data() + s.v_at(b, h, j), s.dv) +
            (c.bias.empty() ? "" : ", bias " + show(double(c.bias[size_t(s.scores_at(b, h, i) + j)]))) + "\n";
  }
  if (permitted > shown) text += "    ... and " + std::to_string(permitted - shown) + " more permitted keys\n";
  if (permitted == 0) text += "    (no permitted key)\n";
  return text;
}

template struct Case<float>;
template struct Case<double>;
template Case<float> draw_case(Chooser&, const CaseLimits&);
template Case<double> draw_case(Chooser&, const CaseLimits&);
template Case<float> dense_twin(const Case<float>&);
template Case<double> dense_twin(const Case<double>&);
template Case<float> slice(const Case<float>&, int64_t, int64_t);
template Case<double> slice(const Case<double>&, int64_t, int64_t);
template std::string describe(const Case<float>&);
template std::string describe(const Case<double>&);
template std::string describe_row(const Case<float>&, int64_t, int64_t, int64_t);
template std::string describe_row(const Case<double>&, int64_t, int64_t, int64_t);

template <class T>
Case<T> with_finite_inputs(Case<T> c) {
  // q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv], bias [B,H,Tq,Tk]: rewritten in place.
  const T big = T(visit_format(c.format, [](auto zero) { return Precision<decltype(zero)>::largest_finite; }) / 2);
  for (std::vector<T>* x : {&c.q, &c.k, &c.v, &c.bias})
    for (T& e : *x)
      if (!std::isfinite(e) && !(x == &c.bias && e == -std::numeric_limits<T>::infinity()))
        e = std::isnan(e) ? big : std::copysign(big, e);
  return c;
}

template Case<float> with_finite_inputs(Case<float>);
template Case<double> with_finite_inputs(Case<double>);

template <class T>
Case<T> with_unseen_inputs(Case<T> c, Unseen how) {
  // q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv], bias [B,H,Tq,Tk]: rewritten in place.
  if (c.shape.varlen) {  // its packed tensors are its twin's, which holds its sequences' mask
    Case<T> twin = with_unseen_inputs(dense_twin(c), how);
    c.q = std::move(twin.q), c.k = std::move(twin.k), c.v = std::move(twin.v);
    return c;
  }
  const Shape& s = c.shape;
  const T big = T(visit_format(c.format, [](auto zero) { return Precision<decltype(zero)>::largest_finite; }) / 2);
  const T ninf = -std::numeric_limits<T>::infinity();
  auto change = [&](T* x, int64_t n, bool bias = false) {  // a -inf bias forbids: finite leaves it
    for (int64_t d = 0; d < n; ++d)
      if (how == Unseen::zero)
        x[d] = T(0);
      else if (!std::isfinite(x[d]) && !(bias && x[d] == ninf))
        x[d] = std::isnan(x[d]) ? big : std::copysign(big, x[d]);
  };
  const Problem<T> p = c.problem();
  auto sees = [&](int64_t b, int64_t h, int64_t i, int64_t j) {
    return c.permits(b, i, j) && (c.bias.empty() || p.bias[s.scores_at(b, h, i) + j] != ninf);
  };
  std::vector<uint8_t> seen(size_t(s.kv_rows()), 0);  // the rows of K and V some query sees (a paged pool's too)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        bool any = false;
        for (int64_t j = 0; j < s.Tk; ++j) {
          if (sees(b, h, i, j)) any = true, seen[size_t(kv_row(s, p.block_table, b, h, j))] = 1;
          if (!c.bias.empty() && !c.permits(b, i, j)) change(&c.bias[size_t(s.scores_at(b, h, i) + j)], 1, true);
        }
        if (!any) change(&c.q[size_t(s.q_at(b, h, i))], s.dk);
      }
  for (int64_t row = 0; row < s.kv_rows(); ++row)
    if (!seen[size_t(row)]) change(&c.k[size_t(row * s.dk)], s.dk), change(&c.v[size_t(row * s.dv)], s.dv);
  return c;
}

template Case<float> with_unseen_inputs(Case<float>, Unseen);

template <class T>
std::string policy_traits(const Case<T>& given) {
  const Case<T> c = given.shape.varlen ? dense_twin(given) : given;  // its rows and their keys
  const Shape& s = c.shape;
  bool empty_row = false;
  for (int64_t b = 0; b < s.B && !empty_row; ++b)
    for (int64_t i = 0; i < s.Tq && !empty_row; ++i) {
      bool any = false;
      for (int64_t j = 0; j < s.Tk && !any; ++j) any = c.permits(b, i, j);
      empty_row = !any;
    }
  const Case<T> finite = with_unseen_inputs(c, Unseen::finite);
  auto same = [](const std::vector<T>& x, const std::vector<T>& y) {
    return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0);
  };
  const bool unseen = !(same(finite.q, c.q) && same(finite.k, c.k) && same(finite.v, c.v) && same(finite.bias, c.bias));
  return std::string(empty_row ? "empty row" : "") + (empty_row && unseen ? ", " : "") + (unseen ? "unseen NaN or inf" : "");
}
template std::string policy_traits(const Case<float>&);
template std::string policy_traits(const Case<double>&);
template Case<double> with_unseen_inputs(Case<double>, Unseen);

}  // namespace attncheck
