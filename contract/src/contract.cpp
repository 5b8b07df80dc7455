#include "attncheck/contract.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <utility>

namespace attncheck {

double effective_scale(const Shape& shape, double scale) { return scale != 0 ? scale : 1.0 / std::sqrt(double(shape.dk)); }

bool causal_allows(Causal causal, int64_t i, int64_t j, int64_t Tq, int64_t Tk, int64_t keys) {
  switch (causal) {
    case Causal::none:
      return true;
    case Causal::upper_left:
      return j <= i;
    case Causal::lower_right:
      return j <= i + Tk - Tq;
    case Causal::kv_end:
      return j <= i + keys - Tq;
  }
  return false;
}

bool window_allows(int64_t left, int64_t right, int64_t i, int64_t j, int64_t Tq, int64_t Tk) {
  const int64_t centre = i + Tk - Tq;
  return (left < 0 || j >= centre - left) && (right < 0 || j <= centre + right);
}

bool permits(const Masks& m, const Shape& s, int64_t b, int64_t i, int64_t j) {
  const int64_t keys = m.key_lengths ? m.key_lengths[b] : s.Tk;
  return (!m.allow || m.allow[s.allow_at(b, i) + j]) && causal_allows(m.causal, i, j, s.Tq, s.Tk, keys) &&
         (!m.key_lengths || j < m.key_lengths[b]) && window_allows(m.window_left, m.window_right, i, j, s.Tq, s.Tk);
}

// Largest element count of any one buffer (Q, K, V, out, scores): no caller is asked to hold more
// than a few GiB, and a typo in a shape is refused rather than allocated.
constexpr int64_t kMaxElements = int64_t(1) << 31;

std::string shape_error(const Shape& s) {
  const int64_t dims[] = {s.B, s.H, s.Tq, s.Tk, s.dk, s.dv};
  const char* names[] = {"B", "H", "Tq", "Tk", "dk", "dv"};
  for (int n = 0; n < 6; ++n)
    if (dims[n] < 1 || dims[n] > kMaxElements)
      return std::string("shape: ") + names[n] + " = " + std::to_string(dims[n]) + " is outside 1.." +
             std::to_string(kMaxElements);
  if (s.H_kv < 0 || s.H_kv > s.H || (s.H_kv > 0 && s.H % s.H_kv != 0))
    return "shape: H_kv = " + std::to_string(s.H_kv) + " does not divide H = " + std::to_string(s.H);
  // In double, so that the products cannot overflow before they are compared.
  const double bh = double(s.B) * double(s.H), bkv = double(s.B) * double(s.kv_heads());
  for (double elements : {bh * s.Tq * s.dk, bkv * s.Tk * s.dk, bkv * s.Tk * s.dv, bh * s.Tq * s.dv, bh * s.Tq * s.Tk})
    if (elements > double(kMaxElements)) return "shape: a buffer would exceed 2^31 elements";
  return paging_error(s);
}

std::string paging_error(const Shape& s) {
  if (s.BS == 0 && s.NB == 0 && s.BPS == 0) return {};  // dense
  for (const auto& [value, name] : {std::pair{s.NB, "num_blocks"}, {s.BS, "block_size"}, {s.BPS, "blocks_per_seq"}})
    if (value < 1 || value > kMaxElements)
      return std::string("paged KV: ") + name + " = " + std::to_string(value) + " is outside 1.." + std::to_string(kMaxElements);
  if (double(s.BPS) * double(s.BS) < double(s.Tk))
    return "paged KV: blocks_per_seq * block_size = " + std::to_string(s.BPS * s.BS) +
           " holds fewer than Tk = " + std::to_string(s.Tk) + " keys";
  const double pool = double(s.NB) * double(s.kv_heads()) * double(s.BS) * double(std::max(s.dk, s.dv));
  if (pool > double(kMaxElements) || double(s.B) * double(s.BPS) > double(kMaxElements))
    return "shape: a buffer would exceed 2^31 elements";
  return {};
}

std::string masks_error(const Masks& m, const Shape& s, double scale) {
  const auto c = int32_t(m.causal);
  if (c < 0 || c > 3) return "causal must be 0 (none), 1 (upper-left), 2 (lower-right) or 3 (kv-end), got " + std::to_string(c);
  if (!std::isfinite(scale)) return "scale must be finite (0 = default 1/sqrt(dk))";
  if (m.window_left < -1 || m.window_right < -1) return "a window side must be -1 (unbounded) or at least 0";
  // ABI v2 carries int32: a wider side would reach the kernel as another window.
  if (m.window_left > INT32_MAX || m.window_right > INT32_MAX)
    return "a window side past 2^31 - 1, more than plugin ABI v2 carries";
  if (m.key_lengths)
    for (int64_t b = 0; b < s.B; ++b)
      if (m.key_lengths[b] < 0) return "key_lengths[" + std::to_string(b) + "] is negative";
  return {};
}

template <class T>
std::string format_error(Format format, std::initializer_list<std::pair<const char*, std::pair<const T*, int64_t>>> inputs) {
  if (format != Precision<T>::format && !(std::is_same_v<T, float> && is_narrow(format)))
    return std::string("format: ") + Precision<T>::name + " buffers cannot hold another format but float16 or bfloat16";
  if (!is_narrow(format)) return {};
  const char* name = format_name(format);
  for (const auto& input : inputs) {  // (name, (buffer, count)); not a structured binding, which C++17 lambdas cannot capture
    const std::pair<const T*, int64_t> buffer = input.second;
    if (!visit_narrow(format, [&](auto zero) { return all_in_format<decltype(zero)>(buffer.first, buffer.second); }))
      return std::string(input.first) + " holds a value that is not a " + name + " (format " + name + ")";
  }
  return {};
}

template <class T>
std::string problem_error(const Problem<T>& p, const Result<T>& r) {
  const Shape& s = p.shape;
  if (std::string e = shape_error(s); !e.empty()) return e;
  if (!p.q || !p.k || !p.v || !r.out) return "a required buffer (q, k, v or out) is null";
  if (std::string e = masks_error(p.masks, s, p.scale); !e.empty()) return e;
  if (!(p.softcap >= 0) || !std::isfinite(p.softcap)) return "softcap must be finite and at least 0 (0 = none)";
  if (!(p.dropout_p >= 0 && p.dropout_p < 1)) return "dropout_p must be in [0, 1) (0 = none)";
  for (int64_t h = 0; p.sinks && h < s.H; ++h)
    if (std::isnan(p.sinks[h]) || p.sinks[h] == std::numeric_limits<float>::infinity())
      return "sinks must be finite or -inf (no sink), not NaN or +inf";
  if (s.paged() != (p.block_table != nullptr)) return "paged KV: a block table and a paged shape come together";
  for (int64_t n = 0; p.block_table && n < s.B * s.BPS; ++n)
    if (p.block_table[n] < 0 || p.block_table[n] >= s.NB)
      return "paged KV: block_table[" + std::to_string(n / s.BPS) + "][" + std::to_string(n % s.BPS) +
             "] = " + std::to_string(p.block_table[n]) + " is outside 0.." + std::to_string(s.NB - 1);
  if (std::string e = varlen_error(p); !e.empty()) return e;
  return format_error<T>(p.format, {{"q", {p.q, s.q_size()}},
                                    {"k", {p.k, s.k_size()}},
                                    {"v", {p.v, s.v_size()}},
                                    {"bias", {p.bias, p.bias ? s.scores_size() : 0}}});
}

template <class T>
std::string varlen_error(const Problem<T>& p) {
  const Shape& s = p.shape;
  if (s.varlen != (p.cu_seqlens_q != nullptr) || s.varlen != (p.cu_seqlens_k != nullptr))
    return "varlen: cu_seqlens_q, cu_seqlens_k and a varlen shape come together";
  if (!s.varlen) return {};
  if (p.masks.allow || p.masks.key_lengths || p.bias || s.paged() || p.dropout_p > 0 || p.masks.causal == Causal::kv_end)
    return "varlen: packed sequences take no allow mask, key lengths, bias, paged KV, dropout or kv-end causal";
  struct Offsets {
    const int32_t* cu;
    const char* name;
    int64_t total;
  };
  for (const Offsets o : {Offsets{p.cu_seqlens_q, "cu_seqlens_q", s.Tq}, Offsets{p.cu_seqlens_k, "cu_seqlens_k", s.Tk}}) {
    auto at = [&](int64_t b) {
      return std::string("varlen: ") + o.name + "[" + std::to_string(b) + "] = " + std::to_string(o.cu[b]);
    };
    if (o.cu[0] != 0) return at(0) + ", not 0";
    for (int64_t b = 0; b < s.B; ++b)
      if (o.cu[b + 1] < o.cu[b]) return at(b + 1) + " is below " + o.name + "[" + std::to_string(b) + "]";
    if (o.cu[s.B] != o.total) return at(s.B) + ", not the packed total " + std::to_string(o.total);
  }
  return {};
}

template <class T>
Problem<T> dense_of(const Problem<T>& p, TwinBuffers<T>& twin) {
  if (p.shape.varlen)
    return unpacked_through(p, twin.allow, [&](int64_t b, int64_t r, int64_t c) {
      const Sequence q = sequence(p, b);
      return c >= q.first_k && c < q.first_k + q.Tk && sequence_permits(p, r - q.first_q, c - q.first_k, q.Tq, q.Tk);
    });
  if (!p.shape.paged()) return p;
  return gathered_through(p, twin.k, twin.v, [&](int64_t b, int64_t h, int64_t j, int64_t width) {
    return kv_row(p.shape, p.block_table, b, h, j) * width;
  });
}

template Problem<float> dense_of(const Problem<float>&, TwinBuffers<float>&);
template Problem<double> dense_of(const Problem<double>&, TwinBuffers<double>&);
template std::string varlen_error(const Problem<float>&);
template std::string varlen_error(const Problem<double>&);
template std::string problem_error(const Problem<float>&, const Result<float>&);
template std::string problem_error(const Problem<double>&, const Result<double>&);
template std::string format_error(Format, std::initializer_list<std::pair<const char*, std::pair<const float*, int64_t>>>);
template std::string format_error(Format, std::initializer_list<std::pair<const char*, std::pair<const double*, int64_t>>>);

}  // namespace attncheck
