#include "attncheck/causes.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <vector>

#include "attncheck/abi.hpp"
#include "attncheck/attention.hpp"
#include "attncheck/case_text.hpp"
#include "attncheck/domain.hpp"
#include "layer_variant.hpp"
#include "attncheck/oracle.hpp"
#include "variant.hpp"

namespace attncheck {
namespace {

// What a probe needs: the kernel, the finding, and the format its probes are in.
struct Probing {
  IsolatedKernel& kernel;
  const Finding& finding;
  Format format;
};

// Whether the kernel may be sent a call: its features claimed, inside its domain.
bool sendable(const IsolatedKernel& kernel, const CallView& call) {
  return (features_used(call) & ~kernel.capabilities()) == 0 && restrictions_broken(call, kernel.domain()) == 0;
}

// The kernel's out for c, or nothing (not sendable, a fault, not taken).
template <class T>
std::optional<std::vector<T>> outputs(IsolatedKernel& kernel, const Case<T>& c) {
  if (!sendable(kernel, call_view(c.problem(), false, false))) return std::nullopt;
  std::vector<T> out;
  if (kernel.run(c, out).kind != Outcome::ok) return std::nullopt;
  return out;
}

// A probe's case: B 1, H heads, `keys` keys, dk = dv the narrowest width the domain takes of at
// least `width`; one query that sees every key, or where the domain wants square or causal calls
// the last of Tq = Tk (the causal mode it takes); the values zero.
template <class T>
Case<T> probe_case(const Probing& p, int64_t heads, int64_t keys, int64_t width = 1) {
  const Domain& d = p.kernel.domain();
  Case<T> c;
  c.format = p.format;
  const std::vector<int64_t> widths = drawable_widths(d.limits, std::max<int64_t>(width, 256));
  const int64_t w = *std::find_if(widths.begin(), widths.end(), [&](int64_t x) { return x >= width || x == widths.back(); });
  if (!d.causal_optional()) c.causal = d.causal_alignment();
  const bool square = d.square() || c.causal == Causal::upper_left;
  c.shape = {1, heads, square ? keys : 1, keys, w, w};
  c.q.assign(size_t(c.shape.q_size()), T(0));
  c.k.assign(size_t(c.shape.k_size()), T(0));
  c.v.assign(size_t(c.shape.v_size()), T(0));
  c.mix = "a probe";
  return c;
}
template <class T>
T& at(std::vector<T>& x, int64_t offset, int64_t column = 0) {
  return x[size_t(offset + column)];
}

// x rounded to the format, in T.
template <class T>
T in_format(Format format, double x) {
  return T(round_to(format, x));
}

// Sets the first column of c's query row (b 0, head h, row i) and of key j so that the score
// scale q . k comes near `score`, both exact in c's format; returns the score they make.
template <class T>
double set_score(Case<T>& c, int64_t h, int64_t i, int64_t j, double score) {
  const double scale = effective_scale(c.shape, c.scale), m = std::fabs(score) / scale;
  const T a = in_format<T>(c.format, std::sqrt(m)), b = in_format<T>(c.format, m / double(a));
  at(c.q, c.shape.q_at(0, h, i)) = score < 0 ? -a : a;
  at(c.k, c.shape.k_at(0, h, j)) = b;
  return scale * double(at(c.q, c.shape.q_at(0, h, i))) * double(b);
}

// The last query row of a probe (the one that sees every key).
template <class T>
int64_t last(const Case<T>& c) {
  return c.shape.Tq - 1;
}

// Bisects, between a score `good` (the kernel right) and `bad` (wrong), both below 0, for where it
// turns: `wrong(score)` is whether the kernel is wrong there (nothing: no answer). Returns the
// closest right and wrong scores found.
std::optional<std::pair<double, double>> boundary(double good, double bad,
                                                  const std::function<std::optional<bool>(double)>& wrong) {
  for (int n = 0; n < 64 && bad / good > 1 + 1e-9; ++n) {
    const double middle = -std::sqrt(good * bad);
    const std::optional<bool> w = wrong(middle);
    if (!w) return std::nullopt;
    (*w ? bad : good) = middle;
  }
  return std::pair{good, bad};
}

// The first score -1, -10, -100, ... at which `wrong` holds, with the last one before it; nothing
// when none does within the format (or the kernel gives no answer).
std::optional<std::pair<double, double>> first_wrong(double largest, const std::function<std::optional<bool>(double)>& wrong) {
  double good = 0;
  for (double s = -1; s >= -largest; s *= 10) {
    const std::optional<bool> w = wrong(s);
    if (!w) return std::nullopt;
    if (*w) return good < 0 ? std::optional(std::pair{good, s}) : std::nullopt;
    good = s;
  }
  return std::nullopt;
}

// The largest score magnitude a probe makes: what q and k of `format` can make, and what the
// arithmetic a kernel computes it in holds (float for f32, f16 and bf16): a score that overflows
// there is -inf, which the contract lets weigh nothing.
double largest_score(Format format) {
  const double top = visit_format(format, [](auto zero) { return Precision<decltype(zero)>::largest_finite; });
  return std::min(format == Format::f64 ? 1e300 : 1e37, top / 4 * (top / 4));
}

// A finite mask value F: query 0 sees key 0 (score s, value 1) but not key 1 (value 3), hidden by a
// mask the kernel takes. Right: 1 whatever s; a forbidden key filled with F instead of -inf gives
// 3 - 2 sigmoid(s - F), 3 once s is far below F. F is read off where the output crosses 2.
template <class T>
std::string finite_mask_value(const Probing& p) {
  const uint32_t can = p.kernel.capabilities();
  Case<T> c = probe_case<T>(p, 1, 2);
  // Key 1 hidden from query 0: by a square causal mask, else an allow mask or a key length, else a
  // causal mask made square.
  if (c.causal != Causal::none && c.shape.Tq == 2) {
  } else if (can & ATTNCHECK_CAP_ALLOW) {
    c.allow.assign(size_t(c.shape.allow_size()), 1);
    c.allow[1] = 0;
  } else if (can & ATTNCHECK_CAP_KV_LENS) {
    c.key_lengths = {1};
  } else if (can & ATTNCHECK_CAP_CAUSAL) {
    c.shape.Tq = 2;
    c.q.assign(size_t(c.shape.q_size()), T(0));
    c.causal = p.kernel.domain().causal_alignment();
  } else {
    return "";
  }
  at(c.v, c.shape.v_at(0, 0, 0)) = 1;
  at(c.v, c.shape.v_at(0, 0, 1)) = 3;
  double last_score = 0, last_out = 1;
  auto out_at = [&](double score) -> std::optional<double> {
    for (int64_t i = 0; i < c.shape.Tq; ++i) last_score = set_score(c, 0, i, 0, score);
    const std::optional<std::vector<T>> out = outputs(p.kernel, c);
    if (!out) return std::nullopt;
    return last_out = double((*out)[size_t(c.shape.out_at(0, 0, 0))]);
  };
  // The fill's signature alone: between 1 and 3 (0 or NaN is another bug's).
  bool other = false;
  auto wrong = [&](double score) -> std::optional<bool> {
    const std::optional<double> o = out_at(score);
    if (!o) return std::nullopt;
    other = other || !(*o > 0.5 && *o < 3.5);
    return *o > 2;
  };
  const auto crossing = first_wrong(largest_score(c.format), wrong);
  if (!crossing || other) return "";
  const auto near = boundary(crossing->first, crossing->second, wrong);
  if (!near || other) return "";
  // Where the output lies strictly between 1 and 3, the fill's own value: s - logit(sigmoid).
  double fill = (near->first + near->second) / 2;
  for (double score : {near->first, near->second})
    if (const std::optional<double> o = out_at(score); o && *o > 1.01 && *o < 2.99) {
      const double sigma = (3 - *o) / 2;
      fill = last_score - std::log(sigma / (1 - sigma));
    }
  return "a forbidden key behaves as if its score were " + round_number(fill) +
         ", a finite value: a permitted score below it loses to the forbidden keys; fill with -inf, or take the "
         "maximum over permitted keys only";
}

// A running maximum that starts at a finite M: one key (value 1) of score s. Right: 1 whatever s;
// started at M, exp(s - M) underflows once s lies about 88 to 104 (float) below M, and the row comes
// out 0 (or NaN). The start is the roundest number that far above where it turns.
template <class T>
std::string running_max_start(const Probing& p) {
  Case<T> c = probe_case<T>(p, 1, 1);
  at(c.v, 0) = 1;
  auto wrong = [&](double score) -> std::optional<bool> {
    set_score(c, 0, 0, 0, score);
    const std::optional<std::vector<T>> out = outputs(p.kernel, c);
    if (!out) return std::nullopt;
    return std::fabs(double((*out)[0]) - 1) > 0.01;
  };
  // A large positive score must be right (else it is no running maximum's start: a softmax
  // without its maximum overflows there).
  if (const std::optional<bool> w = wrong(1000); !w || *w) return "";
  const auto crossing = first_wrong(largest_score(c.format), wrong);
  if (!crossing) return "";
  set_score(c, 0, 0, 0, crossing->second);
  const std::optional<std::vector<T>> out = outputs(p.kernel, c);
  if (!out || ((*out)[0] != 0 && std::isfinite(double((*out)[0])))) return "";  // a zero or NaN row is its signature
  const auto near = boundary(crossing->first, crossing->second, wrong);
  if (!near) return "";
  const double turn = near->first;
  // exp underflows at ln of the smallest subnormal (flush-to-zero: the smallest normal; a
  // reciprocal overflows at ln of the largest value): between those, in the format it computes in.
  const bool wide = p.format == Format::f64;
  const double start = roundest_in(turn + (wide ? 708.3 : 87.3), turn + (wide ? 745.2 : 104));
  return "a running maximum that starts at " + round_number(start) + ", not -inf: a row whose permitted scores all " +
         "lie below " + show(std::round(turn * 10) / 10) + " outputs " + ((*out)[0] == 0 ? "0" : show(double((*out)[0]))) +
         " (every exp(s - max) underflows); start the maximum at -inf";
}

// A float64 call computed in float32: three keys of score 0, values (1, 0, 0) and then 0.1 each,
// give 1/3 and 0.1; float32's roundings of them are 2^-26 off and more, a float64 kernel's 2^-50.
std::string double_in_float(const Probing& p) {
  Case<double> c = probe_case<double>(p, 1, 3);
  std::vector<double> read;
  for (const double value : {1.0, 0.1}) {
    for (int64_t j = 0; j < 3; ++j) at(c.v, c.shape.v_at(0, 0, j)) = j == 0 || value != 1.0 ? value : 0;
    const std::optional<std::vector<double>> out = outputs(p.kernel, c);
    if (!out) return "";
    read.push_back((*out)[size_t(c.shape.out_at(0, 0, last(c)))]);
  }
  const double third = 1.0 / 3, errors[] = {std::fabs(read[0] - third) / third, std::fabs(read[1] - 0.1) / 0.1};
  for (double e : errors)
    if (!(e >= 0x1p-30 && e <= 0x1p-20)) return "";
  return "a float64 call computed in float32: 1/3 came back as " + show(read[0]) + " and 0.1 as " + show(read[1]) +
         ", off by float32's rounding (2^-24), not float64's; compute float64 calls in float64";
}

// A planted bug of impl/variants that the kernel's answers match on a probe where the bug and the
// contract differ by eight bounds and more (bf16's bound is 2^-8 of a value): the kernel within an
// eighth of that difference (and a bound) of the bug's answers.
template <class T>
bool behaves_as(IsolatedKernel& kernel, const Case<T>& c, Mutation mutation) {
  const std::optional<std::vector<T>> out = outputs(kernel, c);
  if (!out) return false;
  std::vector<T> buggy(out->size()), right(out->size());
  variant_attention(c.problem(), buggy.data(), mutant(mutation));
  attention(c.problem(), Result<T>{right.data()});
  const Reference ref = reference(c.problem());
  double apart = 0, off = 0, bound = 0;
  for (size_t n = 0; n < out->size(); ++n) {
    if (!std::isfinite(double(buggy[n])) || !std::isfinite(double(right[n]))) return false;  // a probe of plain values
    const double d = std::fabs(double((*out)[n]) - double(buggy[n]));
    if (!(d <= off)) off = std::isnan(d) ? INFINITY : d;
    apart = std::max(apart, std::fabs(double(buggy[n]) - double(right[n])));
    bound = std::max(bound, ref.out.bound[n]);
  }
  return apart > 8 * bound && off <= apart / 8 + bound;
}

// Scores rounded to f16 or bf16 before the softmax: two keys whose scores differ by 1 to 4 but
// round to one value of the format, values 1 and 0. Right: the weight of the lower, far from 1/2;
// rounded: 1/2.
std::string scores_in_format(const Probing& p) {
  if (!is_narrow(p.format)) return "";
  Case<float> c = probe_case<float>(p, 1, 2);
  const int fraction_bits = visit_format(p.format, [](auto zero) { return Precision<decltype(zero)>::fraction_bits; });
  const double top = std::ldexp(1.0, fraction_bits + 3), scale = effective_scale(c.shape, 0);
  double best = 0, key0 = 0, key1 = 0;
  for (double q : {3, 5, 7, 9, 11, 13, 17, 33, 65, 129}) {  // q k0 just below a power of two, k1 a few of its steps above
    const float a = in_format<float>(p.format, q), k0 = in_format<float>(p.format, (top - 1) / (scale * a));
    float k1 = k0;
    for (int step = 0; step < 16; ++step) {
      const float next = in_format<float>(p.format, double(k1) + std::ldexp(1.0, std::ilogb(k1) - fraction_bits));
      const double first = scale * a * k0, second = scale * a * next;
      if (round_to(p.format, first) != round_to(p.format, second) ||
          round_to(p.format, first * (1 + 1e-6)) != round_to(p.format, first))
        break;
      k1 = next;
      if (second - first > best) best = second - first, key0 = k0, key1 = k1, c.q[0] = a;
    }
  }
  if (best < 1) return "";
  for (int64_t i = 0; i < c.shape.Tq; ++i) at(c.q, c.shape.q_at(0, 0, i)) = c.q[0];
  at(c.k, c.shape.k_at(0, 0, 0)) = float(key0);
  at(c.k, c.shape.k_at(0, 0, 1)) = float(key1);
  at(c.v, c.shape.v_at(0, 0, 0)) = 1;
  if (!behaves_as(p.kernel, c, Mutation::scores_in_format)) return "";
  const double a = double(c.q[0]), exact = 1 / (1 + std::exp(scale * a * (key1 - key0)));
  return std::string("scores rounded to ") + format_name(p.format) + " before the softmax: scores " + show(scale * a * key0) +
         " and " + show(scale * a * key1) + " came out weighed alike (0.5 each; exact " + show(exact) + " and " +
         show(1 - exact) + "); keep the scores in float32 until the weights";
}

// The scale taken from the model width: two heads, keys e_1 t and 0, values e_1 and e_2: out_1 /
// out_2 = exp(c t), so the scale c is read off the output: 1/sqrt(H dk) is the bug's, 1/sqrt(dk) right.
template <class T>
std::string model_width_scale(const Probing& p) {
  Case<T> c = probe_case<T>(p, 2, 2, 2);
  const int64_t w = c.shape.dk;
  const double t = double(in_format<T>(c.format, std::sqrt(double(w))));
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < c.shape.Tq; ++i) at(c.q, c.shape.q_at(0, h, i)) = 1;
    at(c.k, c.shape.k_at(0, h, 0)) = T(t);
    at(c.v, c.shape.v_at(0, h, 0)) = 1;
    at(c.v, c.shape.v_at(0, h, 1), 1) = 1;
  }
  const std::optional<std::vector<T>> out = outputs(p.kernel, c);
  if (!out) return "";
  const size_t row = size_t(c.shape.out_at(0, 0, last(c)));
  const double read = std::log(double((*out)[row]) / double((*out)[row + 1])) / t, one = 1 / std::sqrt(double(w)),
               model = 1 / std::sqrt(2.0 * double(w));
  if (!(std::fabs(read - model) < 1e-3 * model)) return "";
  return "the scale taken from the model width: scores scaled by 1/sqrt(H dk) = " + show(model) +
         " (read off the output), not by 1/sqrt(dk) = " + show(one) + ", one head's width";
}

// The softmax over the queries' axis: two queries, two keys, distinct scores.
template <class T>
std::string softmax_over_queries(const Probing& p) {
  Case<T> c = probe_case<T>(p, 1, 2, 2);
  c.shape.Tq = 2;  // two queries to normalize over (square: what every domain takes)
  c.q.assign(size_t(c.shape.q_size()), T(0));
  const T values[2][2] = {{1, 0}, {2, -1}};
  for (int64_t i = 0; i < 2; ++i) at(c.q, c.shape.q_at(0, 0, i)) = values[i][0], at(c.q, c.shape.q_at(0, 0, i), 1) = values[i][1];
  at(c.k, c.shape.k_at(0, 0, 0)) = 1, at(c.k, c.shape.k_at(0, 0, 1), 1) = 1;
  at(c.v, c.shape.v_at(0, 0, 0)) = 1, at(c.v, c.shape.v_at(0, 0, 1), 1) = 1;
  if (!behaves_as(p.kernel, c, Mutation::softmax_over_queries)) return "";
  return "the softmax taken over the queries' axis: each key's weights sum to one over the queries, not each "
         "query's over the keys; normalize along the keys (the last axis)";
}

// The allow mask read with its polarity inverted (true = blocked): a query allowed key 0 alone.
template <class T>
std::string inverted_polarity(const Probing& p) {
  if (!(p.kernel.capabilities() & ATTNCHECK_CAP_ALLOW)) return "";
  Case<T> c = probe_case<T>(p, 1, 2, 2);
  c.allow.assign(size_t(c.shape.allow_size()), 1);
  c.allow[size_t(c.shape.allow_at(0, last(c)) + 1)] = 0;
  at(c.v, c.shape.v_at(0, 0, 0)) = 1, at(c.v, c.shape.v_at(0, 0, 1), 1) = 1;
  if (!behaves_as(p.kernel, c, Mutation::inverted_polarity)) return "";
  return "the allow mask read with its polarity inverted (true = blocked, as nn.MultiheadAttention's masks): "
         "the keys it allows are hidden and those it forbids seen; true means may attend";
}

// The layer's classes: a self-attention layer of two heads two wide (D 4), no bias, against the
// layer's planted bugs (layer_variant.hpp).
std::string layer_bug(const Probing& p) {
  const Domain& d = p.kernel.domain();
  if (!d.limits.takes_width(2) || (d.limits.max_H > 0 && d.limits.max_H < 2)) return "";
  LayerCase<float> c;
  c.format = p.format == Format::f64 ? Format::f32 : p.format;
  c.shape = {{1, 2, 3, 3, 2, 2}, 4};
  c.self_attention = true;
  if (!d.causal_optional()) c.causal = d.causal_alignment();
  c.mix = "a probe";
  auto filled = [&](int64_t n, int64_t seed) {  // small distinct values, exact in every format
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) x[size_t(e)] = float((e * 7 + seed * 3) % 9 - 4) / 4;
    return x;
  };
  c.x_q = filled(c.shape.x_q_size(), 1);
  c.w_q = filled(16, 2), c.w_k = filled(16, 3), c.w_v = filled(16, 4), c.w_o = filled(16, 5);
  if (!sendable(p.kernel, layer_call_view(c.layer(), false))) return "";
  std::vector<float> out;
  if (p.kernel.run_layer(c, out).kind != Outcome::ok) return "";
  std::vector<float> right(out.size());
  mha_variant(c.layer(), LayerResult<float>{right.data()}, LayerVariant::builtin);
  const std::pair<LayerMutation, const char*> bugs[] = {
      {LayerMutation::heads_split_dk_major,
       "the heads split with dk and H swapped (view(B, T, dk, H) for view(B, T, H, dk)): head h takes columns h, h + H, "
       "...; split the last axis as [H, dk]"},
      {LayerMutation::scale_from_d_model, "the scale taken from the model width: 1/sqrt(D) for 1/sqrt(dk), one head's width"},
      {LayerMutation::heads_merged_untransposed,
       "the heads merged without the transpose: [B, H, Tq, dv] reshaped to [B, Tq, H dv] with no permute first"}};
  for (const auto& [mutation, sentence] : bugs) {
    std::vector<float> buggy(out.size());
    mha_variant(c.layer(), LayerResult<float>{buggy.data()}, layer_mutant_home(mutation), mutation);
    double apart = 0, off = 0;
    for (size_t n = 0; n < out.size(); ++n) {
      apart = std::max(apart, std::fabs(double(buggy[n]) - double(right[n])));
      const double d = std::fabs(double(out[n]) - double(buggy[n]));
      if (!(d <= off)) off = std::isnan(d) ? INFINITY : d;
    }
    if (apart > 1e-2 && off <= apart / 100 + 1e-5) return sentence;
  }
  return "";
}

// The classes, each with when it applies to a finding and its probe, most telling first.
struct Cause {
  bool (*applies)(const Finding&);
  std::string (*probe)(const Probing&);
};

bool wrong_out(const Finding& f) { return f.diagnosis.wrong && f.property.rfind("Layer", 0) != 0; }

// Whether the finding's failed call hides some key from some query: a finite mask value shows only
// there (a wrong scale beside it, on a call with no mask, is another bug).
bool hides_a_key(const Finding& f) {
  if (f.failed_call.empty()) return false;
  return visit_case_text(f.failed_call, [](const auto& c) {
    for (int64_t b = 0; b < c.shape.B; ++b)
      for (int64_t i = 0; i < c.shape.Tq; ++i)
        for (int64_t j = 0; j < c.shape.Tk; ++j)
          if (!c.permits(b, i, j)) return true;
    return false;
  });
}

// A probe in the finding's format: float for f32, f16 and bf16, double for f64.
template <std::string (*F)(const Probing&), std::string (*D)(const Probing&)>
std::string in_its_format(const Probing& p) {
  return p.format == Format::f64 ? D(p) : F(p);
}

const Cause kCauses[] = {
    {[](const Finding& f) { return wrong_out(f) && f.format == format_name(Format::f64) && !f.diagnosis.element.special(); },
     double_in_float},
    {[](const Finding& f) {
       return wrong_out(f) && (f.diagnosis.element.computed == 0 || !std::isfinite(f.diagnosis.element.computed));
     },
     in_its_format<running_max_start<float>, running_max_start<double>>},
    {[](const Finding& f) { return wrong_out(f) && hides_a_key(f); },
     in_its_format<finite_mask_value<float>, finite_mask_value<double>>},
    {wrong_out, scores_in_format},
    {wrong_out, in_its_format<model_width_scale<float>, model_width_scale<double>>},
    {wrong_out, in_its_format<softmax_over_queries<float>, softmax_over_queries<double>>},
    {wrong_out, in_its_format<inverted_polarity<float>, inverted_polarity<double>>},
    {[](const Finding& f) { return f.property.rfind("Layer", 0) == 0 && !f.hung; }, layer_bug},
};

}  // namespace

std::string round_number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", x);
  std::string s = text;
  const size_t e = s.find('e');
  if (e == std::string::npos) return s;
  const int exponent = std::atoi(s.c_str() + e + 1);
  if (exponent >= 0 && exponent < 5) {  // -1e+04 as -10000
    std::snprintf(text, sizeof text, "%.0f", x);
    return text;
  }
  return s.substr(0, e + 1) + std::to_string(exponent);
}

double roundest_in(double lo, double hi) {
  const double middle = (lo + hi) / 2, magnitude = std::max(std::fabs(lo), std::fabs(hi));
  for (int digits = 1; digits <= 17; ++digits) {
    const double step = std::pow(10.0, std::floor(std::log10(magnitude)) - digits + 1);
    const double nearest = std::round(middle / step) * step;
    for (double x : {nearest, nearest - step, nearest + step})
      if (x >= lo && x <= hi) return x;
  }
  return middle;
}

std::string cause_of(IsolatedKernel& kernel, const Finding& finding, CauseCache& cache) {
  Format format = Format::f32;
  for (Format f : kFormats)
    if (finding.format == format_name(f)) format = f;
  if (!(kernel.capabilities() & capability_of(format))) return "";
  const Probing p{kernel, finding, format};
  for (int n = 0; n < int(std::size(kCauses)); ++n) {
    if (!kCauses[n].applies(finding)) continue;
    const auto [at, fresh] = cache.answered.try_emplace({n, format});
    if (fresh) at->second = kCauses[n].probe(p);
    if (!at->second.empty()) return at->second;
  }
  return "";
}

}  // namespace attncheck
