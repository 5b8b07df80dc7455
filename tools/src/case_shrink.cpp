#include "attncheck/case_shrink.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attncheck/abi.hpp"
#include "attncheck/call_scalars.hpp"
#include "attncheck/call_schema.hpp"
#include "attncheck/features.hpp"

namespace attncheck {
namespace {

// The indices of each dim a move removes (gone[d][i] true: index i of dim d; empty: none of d's).
struct Removal {
  std::vector<bool> gone[kDims];
  void add(Dim d, int64_t size, int64_t from, int64_t to) {
    gone[int(d)].resize(size_t(size));
    for (int64_t i = from; i < to; ++i) gone[int(d)][size_t(i)] = true;
  }
  bool removes(Dim d, int64_t i) const { return !gone[int(d)].empty() && gone[int(d)][size_t(i)]; }
};

// x, the buffer of slot s in a call of dims d, without the elements at an index r removes along
// any of its axes.
template <class V>
std::vector<V> erase(const std::vector<V>& x, const Slot& s, const Dims& d, const Removal& r) {
  if (x.empty()) return x;
  const Extent& shape = extent_in(s, d);  // a paged call's pools lose no key: a key is a slot of a block
  std::vector<V> kept;
  kept.reserve(x.size());
  int64_t index[4] = {};  // the element's index along each of s's axes, the last fastest
  for (const V& value : x) {
    bool gone = false;
    for (int a = 0; a < shape.rank; ++a) gone = gone || r.removes(shape.dims[a], index[a]);
    if (!gone) kept.push_back(value);
    for (int a = shape.rank - 1; a >= 0 && ++index[a] == d[shape.dims[a]]; --a) index[a] = 0;
  }
  return kept;
}

// The axes a case can lose indices along, and what losing [from, to) of one does to every buffer.
// position: a query and the key at its index together (a square domain); head_width: a column of
// q and k and one of v together (dk = dv).
enum Axis { batch, head, kv_group, group_member, query, key, key_width, value_width, position, head_width };

// What losing [from, to) along `axis` removes of each dim of shape s.
Removal removal(const Shape& s, Axis axis, int64_t from, int64_t to) {
  const int64_t kv = s.kv_heads(), group = s.H / kv;
  Removal r;
  switch (axis) {
    case batch:
      r.add(Dim::B, s.B, from, to);
      break;
    case head:  // every query head its own KV head
      r.add(Dim::H, s.H, from, to), r.add(Dim::H_kv, kv, from, to);
      break;
    case kv_group:  // KV heads [from, to) with their groups of query heads
      r.add(Dim::H_kv, kv, from, to), r.add(Dim::H, s.H, from * group, to * group);
      break;
    case group_member:  // members [from, to) of every group of query heads: groups n smaller
      for (int64_t g = 0; g < kv; ++g) r.add(Dim::H, s.H, g * group + from, g * group + to);
      break;
    case query:
      r.add(Dim::Tq, s.Tq, from, to);
      break;
    case key:
      r.add(Dim::Tk, s.Tk, from, to);
      break;
    case key_width:
      r.add(Dim::dk, s.dk, from, to);
      break;
    case value_width:
      r.add(Dim::dv, s.dv, from, to);
      break;
    case position:
    case head_width:
      break;  // two moves, made one after the other (without)
  }
  return r;
}

template <class T>
Case<T> without(const Case<T>& c, Axis axis, int64_t from, int64_t to) {
  if (axis == position) return without(without(c, query, from, to), key, from, to);
  if (axis == head_width) return without(without(c, key_width, from, to), value_width, from, to);
  // Every input (call_slots.def) loses the elements at the removed indices of its dims.
  const Removal removed = removal(c.shape, axis, from, to);
  const Dims before = dims_of(c.shape);
  Case<T> r = c;
  for_each_case_input(r, [&](const Slot& s, auto& buffer) { buffer = erase(buffer, s, before, removed); });
  if (axis == key)  // key lengths count the keys left before their end
    for (int32_t& length : r.key_lengths) length -= int32_t(std::clamp<int64_t>(length - from, 0, to - from));
  Dims after = before;
  for (int d = 0; d < kDims; ++d) after[Dim(d)] -= std::count(removed.gone[d].begin(), removed.gone[d].end(), true);
  if (after[Dim::H_kv] == after[Dim::H]) after[Dim::H_kv] = 0;  // as many as H: the shape's way of saying so
  set_dims(r.shape, after);
  return r;
}

// Plainer values than x, plainest first: 0, then +-1, +-2 and +-3, then the power of two next below
// |x|, then x's integer part, each closer to 0 than x; and for x below 1 in magnitude +-1, +-2, +-3
// and +-0.5 in its place, not ever smaller powers of two: a wrong weight shows as 1 against 0, not as
// 3.9e-31 against 0 (NaN and inf try 0 and the small integers). 3 and the integer part are there for
// bugs that a power of two hides (a factor that cancels exactly). Each value leads to 0 in a few
// steps: one below 1 only to a plain one, one of 1 or more only closer to 0.
template <class T>
std::vector<T> plainer(T x) {
  if (x == T(0)) return {};
  const T sign = std::signbit(x) ? T(-1) : T(1);
  const bool small = std::fabs(x) < T(1);
  std::vector<T> values = {T(0)};
  auto add = [&](T plain) {
    if ((!std::isfinite(x) || small || std::fabs(plain) < std::fabs(x)) && plain != x &&
        std::find(values.begin(), values.end(), plain) == values.end())
      values.push_back(plain);
  };
  for (T plain : {T(1), T(2), T(3)}) add(sign * plain);
  if (small) add(sign * T(0.5));
  if (std::isfinite(x) && !small) {
    add(sign * std::exp2(std::floor(std::log2(std::fabs(x)))));
    add(std::trunc(x));
  }
  return values;
}

// c with `change` made to a copy of it.
template <class T, class F>
Case<T> changed(const Case<T>& c, F change) {
  Case<T> r = c;
  change(r);
  return r;
}

// c without the features among `which` (capability bits): the inputs each brings absent
// (call_schema.hpp) and the scalars each brings at their defaults (call_scalars.hpp), as the
// shrinker tries and a finding is compared without them.
template <class T>
Case<T> cleared(const Case<T>& c, uint32_t which) {
  return changed(c, [which](Case<T>& r) {
    for_each_case_input(r, [which](const Slot& s, auto& x) {
      if (s.feature & which) x.clear();
    });
    const Case<T> plain;  // each scalar's default
    for_each_scalar_row([&](auto, auto in_case, auto, auto, ScalarRow row) {
      if constexpr (has_member<decltype(in_case), Case<T>>)
        if (row.feature & which) in_case(r) = in_case(plain);
    });
  });
}

// Whether c uses feature f, as the feature's row (features.hpp) reads it off the call.
template <class T>
bool uses(const Case<T>& c, uint32_t f) {
  return feature(f).used(call_view(c.problem(), false, false));
}

// c with the default scale (1/sqrt(dk)) in place of an explicit one.
template <class T>
Case<T> with_default_scale(const Case<T>& c) {
  return changed(c, [](Case<T>& r) { r.scale = 0; });
}

// The masks among `which` (ATTNCHECK_CAP_CAUSAL, _WINDOW, _KV_LENS bits) folded into c's allow mask:
// the same keys permitted, through the allow mask alone for those.
constexpr uint32_t kRelativeMasks = ATTNCHECK_CAP_CAUSAL | ATTNCHECK_CAP_WINDOW | ATTNCHECK_CAP_KV_LENS;
template <class T>
Case<T> folded(const Case<T>& c, uint32_t which) {
  const Shape& s = c.shape;
  Case<T> r = cleared(c, which);
  // r keeps the masks not folded: where r permits what c does not, the allow mask forbids it.
  r.allow.assign(size_t(s.allow_size()), 0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < s.Tq; ++i)
      for (int64_t j = 0; j < s.Tk; ++j) r.allow[size_t(s.allow_at(b, i) + j)] = c.permits(b, i, j);
  return r;
}

// c with its grouped KV heads repeated, each query head its own: k, v [B,H_kv,Tk,*] become [B,H,Tk,*].
template <class T>
Case<T> with_full_heads(const Case<T>& c) {
  const Shape& s = c.shape;
  Case<T> r = c;
  r.shape.H_kv = 0;
  r.k.assign(size_t(r.shape.k_size()), T(0));
  r.v.assign(size_t(r.shape.v_size()), T(0));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t j = 0; j < s.Tk; ++j) {
        std::copy_n(c.k.begin() + s.k_at(b, h, j), s.dk, r.k.begin() + r.shape.k_at(b, h, j));
        std::copy_n(c.v.begin() + s.v_at(b, h, j), s.dv, r.v.begin() + r.shape.v_at(b, h, j));
      }
  return r;
}

// What a shrunk case still has, for its `mix` line (the drawn case's no longer describes it).
template <class T>
std::string features(const Case<T>& c) {
  const uint32_t used = features_used(call_view(c.problem(), false, false)) & ~kFormatCapabilities;
  return used ? "shrunk, " + feature_names(used) : "shrunk";
}

// Ranges of every axis (members of every KV group among them), halves of each first, then quarters
// of each... (delta debugging, level by level across the axes): a large case loses most of itself
// in a few trials, whichever axis is large, and a small one an index at a time. A square case
// loses queries and keys together too, and one with dk = dv columns of both widths, so that a
// domain that takes only those still shrinks.
template <class T, class Accept>
bool offer_fewer_indices(const Case<T>& c, const Accept& accept) {
  const Shape& s = c.shape;
  const int64_t kv = s.kv_heads(), group = s.H / kv;
  const int64_t packed = s.varlen ? 0 : 1;  // a varlen case keeps its sequences (its twin loses them: offer_fewer_masks)
  const std::pair<Axis, int64_t> axes[] = {{batch, s.B * packed},
                                           {group == 1 ? head : kv_group, group == 1 ? s.H : kv},
                                           {group_member, group > 1 ? group : 0},
                                           {query, s.Tq * packed},
                                           {key, s.Tk * packed},
                                           {position, s.Tq == s.Tk ? s.Tq * packed : 0},
                                           {key_width, s.dk},
                                           {value_width, s.dv},
                                           {head_width, s.dk == s.dv ? s.dk : 0}};
  for (int64_t parts = 2, widest = 1; widest >= 1; parts *= 2) {
    widest = 0;
    for (const auto& [axis, n] : axes) {
      const int64_t width = n / parts;
      widest = std::max(widest, width);
      for (int64_t from = 0; width >= 1 && from + width <= n; from += width) {
        if (accept(without(c, axis, from, from + width))) return true;
        // Keys removed move the diagonal the window is drawn from width to the left, and with it
        // the keys before them: the window's left side as much narrower keeps those where they were.
        if (axis == key && c.window_left >= width) {
          Case<T> shifted = without(c, axis, from, from + width);
          shifted.window_left -= width;
          if (accept(std::move(shifted))) return true;
        }
      }
    }
  }
  return false;
}

// Masks and options, each cleared; a window narrower; the masks drawn from the diagonal folded.
template <class T, class Accept>
bool offer_fewer_masks(const Case<T>& c, uint32_t capabilities, const Accept& accept) {
  if (c.shape.paged() && accept(dense_twin(c))) return true;  // its dense twin, the same keys
  if (c.shape.varlen && (capabilities & ATTNCHECK_CAP_ALLOW) && accept(dense_twin(c))) return true;  // one batch, one mask
  for (const uint32_t f : {ATTNCHECK_CAP_BIAS, ATTNCHECK_CAP_SOFTCAP, ATTNCHECK_CAP_WINDOW, ATTNCHECK_CAP_CAUSAL,
                           ATTNCHECK_CAP_ALLOW, ATTNCHECK_CAP_KV_LENS})
    if (uses(c, f) && !(f == ATTNCHECK_CAP_KV_LENS && c.shape.paged()) && accept(cleared(c, f)))  // (a paged case's
      return true;                                                                                // padding is poison)
  if (c.scale != 0 && accept(with_default_scale(c))) return true;
  // A window narrower (its sides toward 0), so that fewer keys sit inside it.
  for (int64_t Case<T>::*side : {&Case<T>::window_left, &Case<T>::window_right})
    for (int64_t narrower : {int64_t(0), c.*side / 2, c.*side - 1})
      if (narrower >= 0 && narrower < c.*side && accept(changed(c, [&](Case<T>& r) { r.*side = narrower; }))) return true;
  // Causal and window masks, key lengths and allow mask folded into one allow mask: the window and
  // causal masks are drawn from the diagonal, which moves when a key or query is removed, so a
  // case that needs them only as a pattern of hidden keys shrinks past them once folded.
  const bool relative = !c.shape.varlen && (c.causal != Causal::none || c.window_left >= 0 || c.window_right >= 0);
  return relative && (capabilities & ATTNCHECK_CAP_ALLOW) && accept(folded(c, kRelativeMasks));
}

// Values: a whole tensor in the case's format at 0, then one value at a time (small tensors only:
// a trial each).
template <class T, class Accept>
bool offer_plainer_values(const Case<T>& c, const Accept& accept) {
  bool taken = false;
  auto each_tensor = [&](auto offer_tensor) {
    for_each_input_row(
        [&](const Slot& s, auto, auto in_case) {
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(in_case(c))>, std::vector<T>>)
            if (!taken && s.element == Element::format) taken = offer_tensor(in_case);
        },
        [](const Slot&, auto) {});
  };
  each_tensor([&](auto in_case) {
    const std::vector<T>& x = in_case(c);
    const bool zero = std::all_of(x.begin(), x.end(), [](T value) { return value == T(0); });
    return !zero && accept(changed(c, [&](Case<T>& r) { std::fill(in_case(r).begin(), in_case(r).end(), T(0)); }));
  });
  each_tensor([&](auto in_case) {
    const std::vector<T>& x = in_case(c);
    for (size_t at = 0; at < x.size() && x.size() <= 64; ++at)
      for (T value : plainer(x[at]))
        if (accept(changed(c, [&](Case<T>& r) { in_case(r)[at] = T(round_to(c.format, double(value))); }))) return true;
    return false;
  });
  return taken;
}

}  // namespace

template <class T>
bool offer_simpler(const Case<T>& c, uint32_t capabilities, const std::function<bool(Case<T>&&)>& offer, const Domain& domain) {
  const auto accept = [&](Case<T>&& candidate) {
    if (restrictions_broken(call_view(candidate.problem(), false, false), domain)) return false;
    candidate.mix = features(candidate);
    return offer(std::move(candidate));
  };
  return offer_fewer_indices(c, accept) || offer_fewer_masks(c, capabilities, accept) || offer_plainer_values(c, accept);
}

template <class T>
std::vector<WithoutFeature<T>> without_each_feature(const Case<T>& c, uint32_t capabilities, const Domain& domain) {
  std::vector<WithoutFeature<T>> without;
  auto add = [&](const std::string& name, Case<T> r) {
    if (!restrictions_broken(call_view(r.problem(), false, false), domain)) without.push_back({name, std::move(r)});
  };
  if (c.shape.paged()) add(feature(ATTNCHECK_CAP_PAGED_KV).name, dense_twin(c));
  if (c.shape.varlen && (capabilities & ATTNCHECK_CAP_ALLOW)) add(feature(ATTNCHECK_CAP_VARLEN).name, dense_twin(c));
  const bool laid_out = c.shape.paged() || c.shape.varlen;  // K and V not [B,H_kv,Tk,d]: the twin stands for them
  if (c.shape.kv_heads() != c.shape.H && !laid_out) add(feature(ATTNCHECK_CAP_GQA).name, with_full_heads(c));
  for (uint32_t mask : {ATTNCHECK_CAP_CAUSAL, ATTNCHECK_CAP_WINDOW, ATTNCHECK_CAP_KV_LENS})
    if ((capabilities & ATTNCHECK_CAP_ALLOW) && uses(c, mask) && !c.shape.varlen) add(feature(mask).name, folded(c, mask));
  for (const uint32_t f : {ATTNCHECK_CAP_SOFTCAP, ATTNCHECK_CAP_BIAS})
    if (uses(c, f)) add(feature(f).name, cleared(c, f));
  if (c.format != Precision<T>::format && (capabilities & ATTNCHECK_CAP_F32))
    add(feature(capability_of(c.format)).name, changed(c, [](Case<T>& r) { r.format = Precision<T>::format; }));
  if (c.scale != 0 && c.scale != effective_scale(c.shape, 0)) add("explicit scale", with_default_scale(c));
  return without;
}

template std::vector<WithoutFeature<float>> without_each_feature(const Case<float>&, uint32_t, const Domain&);
template std::vector<WithoutFeature<double>> without_each_feature(const Case<double>&, uint32_t, const Domain&);
template bool offer_simpler(const Case<float>&, uint32_t, const std::function<bool(Case<float>&&)>&, const Domain&);
template bool offer_simpler(const Case<double>&, uint32_t, const std::function<bool(Case<double>&&)>&, const Domain&);

}  // namespace attncheck
