// attncheck compare: checks tensors dumped from PyTorch or anywhere else against the oracle.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <unistd.h>

#include "attncheck/attention.hpp"
#include "attncheck/attention_backward.hpp"
#include "attncheck/backward.hpp"
#include "attncheck/commands.hpp"
#include "attncheck/compare.hpp"
#include "attncheck/flags.hpp"
#include "attncheck/npy.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/policy_flags.hpp"
#include "attncheck/rows.hpp"
#include "attncheck/source_text.hpp"

namespace attncheck {
namespace {

// A line on stderr that follows the oracle's rows, rewritten in place (a [1,32,4096,128] problem's
// every row takes minutes): on a terminal only, and for a problem beyond kAllRowsPairs pairs.
RowProgress progress_line(const char* what, int64_t pairs) {
  if (!isatty(STDERR_FILENO) || pairs <= kAllRowsPairs) return {};
  return [what](int64_t done, int64_t total) {
    if (total == 0) return;
    std::fprintf(stderr, "\rattncheck compare: %s: %lld of %lld computed exactly", what, (long long)done, (long long)total);
    if (done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

// Every input fault: one line, exit 2.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A tensor's shape read as [B,H,T,d] from [T,d], [B,T,d] or, by --layout, [B,H,T,d] (bhsd) or
// [B,T,H,d] (bshd: JAX, FlashAttention, transformers).
struct FileDims {
  int64_t B, H, T, d;
};

FileDims dims_of(const NpyArray& a, const std::string& name, bool bshd = false) {
  const auto& s = a.shape;
  if (s.size() < 2 || s.size() > 4)
    throw InputError(name + ": expected shape [T,d], [B,T,d] or [B,H,T,d], got " + std::to_string(s.size()) + " dims");
  for (int64_t dim : s)
    if (dim < 1) throw InputError(name + ": every dimension must be at least 1");
  const size_t r = s.size();
  if (r == 4 && bshd) return {s[0], s[2], s[1], s[3]};
  return {r >= 3 ? s[0] : 1, r == 4 ? s[1] : 1, s[r - 2], s[r - 1]};
}

// A 4-D [B,T,H,d] tensor's data, of `bytes` per element, made [B,H,T,d].
void to_bhsd(NpyArray& a, size_t bytes) {
  if (a.shape.size() != 4) return;
  const int64_t B = a.shape[0], T = a.shape[1], H = a.shape[2], d = a.shape[3];
  std::vector<uint8_t> moved(a.data.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        std::memcpy(&moved[size_t((((b * H + h) * T + t) * d) * int64_t(bytes))],
                    &a.data[size_t((((b * T + t) * H + h) * d) * int64_t(bytes))], size_t(d) * bytes);
  a.data = std::move(moved);
  a.shape = {B, H, T, d};
}

// Whether q, k, v and out fit one attention problem: Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V
// [B,H_kv,Tk,dv], out [B,H,Tq,dv], H_kv dividing H.
bool fits(const FileDims& q, const FileDims& k, const FileDims& v, const FileDims& out) {
  return k.B == q.B && v.B == q.B && out.B == q.B && q.H % k.H == 0 && v.H == k.H && out.H == q.H && k.d == q.d && v.T == k.T &&
         out.T == q.T && out.d == v.d;
}

// The mask's shape read against [B,H,Tq,Tk]: [Tq,Tk], [B,Tq,Tk] (as before), or 4-D with each of
// B, H, Tq and Tk either itself or 1 (broadcast, as PyTorch's and JAX's masks are); empty when it fits none.
std::vector<int64_t> mask_dims(const std::vector<int64_t>& m, const Shape& s) {
  if (m.size() == 2 && m[0] == s.Tq && m[1] == s.Tk) return {1, 1, s.Tq, s.Tk};
  if (m.size() == 3 && m[0] == s.B && m[1] == s.Tq && m[2] == s.Tk) return {s.B, 1, s.Tq, s.Tk};
  const int64_t full[4] = {s.B, s.H, s.Tq, s.Tk};
  if (m.size() != 4) return {};
  for (int axis = 0; axis < 4; ++axis)
    if (m[size_t(axis)] != full[axis] && m[size_t(axis)] != 1) return {};
  return m;
}

std::string shape_text(const FileDims& d) {
  return "[" + std::to_string(d.B) + "," + std::to_string(d.H) + "," + std::to_string(d.T) + "," + std::to_string(d.d) + "]";
}

// The tensors compare reads a file of: every slot of a forward and a backward call (call_slots.def)
// but the dropout keep mask (compare checks no dropout), each given by the flag of its name ('_' as '-').
bool compared(const Slot& s) {
  return (s.role(CallKind::forward) != Role::none || s.role(CallKind::backward) != Role::none) &&
         s.feature != ATTNCHECK_CAP_DROPOUT_MASK;
}
std::string flag_of(const Slot& s) {
  std::string flag = s.name;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}
std::vector<const Slot*> compared_slots() {
  std::vector<const Slot*> slots;
  for (const Slot& s : kSlots)
    if (compared(s)) slots.push_back(&s);
  return slots;
}

// A tensor of rows per head, [B,H,T,d] (q, k, v, out and the backward's), read from [T,d] or
// [B,T,d] too and laid out by --layout; the others (the mask, bias, lse) have fixed shapes.
bool rows_per_head(const Slot& s) {
  return s.element == Element::format && s.shape.rank == 4 && (s.shape.dims[3] == Dim::dk || s.shape.dims[3] == Dim::dv);
}

// The backward's tensors (its feature's): each, dout of out and dq of q, has the shape of the
// tensor it differentiates, named after it.
bool a_gradient(const Slot& s) { return s.feature == ATTNCHECK_CAP_BACKWARD; }
std::string differentiated(const Slot& s) { return s.name + 1; }

// --window L,R: each side -1 (unbounded) or a key count.
std::pair<int64_t, int64_t> window_of(const std::string& text) {
  const size_t comma = text.find(',');
  auto side = [&](const std::string& part) {
    char* end = nullptr;
    const long long n = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || n < -1 || n > (int64_t(1) << 31))
      throw InputError("--window: expected L,R, each -1 (unbounded) or a number of keys, got '" + text + "'");
    return int64_t(n);
  };
  if (comma == std::string::npos) side("");
  return {side(text.substr(0, comma)), side(text.substr(comma + 1))};
}

// The format a tensor file holds: float32, float64, float16, or bfloat16 as uint16 or int16 bit
// patterns, which only --dtype bf16 can say, since NumPy has no bfloat16 and the bits read as
// integers would be nonsense.
Format format_of(const NpyArray& a, const std::string& file, bool bf16_bits) {
  switch (a.dtype) {
    case NpyDtype::f32:
      return Format::f32;
    case NpyDtype::f64:
      return Format::f64;
    case NpyDtype::f16:
      return Format::f16;
    case NpyDtype::u16:
    case NpyDtype::i16:
      if (bf16_bits) return Format::bf16;
      throw InputError(file + ": dtype " + dtype_name(a.dtype) +
                       ": if these are bfloat16 bit patterns (t.view(torch.int16)), pass --dtype bf16");
    default:
      throw InputError(file + ": dtype " + dtype_name(a.dtype) + ", expected float32 or float64 " +
                       "(or float16, or bfloat16 bits as uint16/int16 with --dtype bf16)");
  }
}

// --dtype's word, a format's short_name (f32, f64, f16, bf16), -> the format.
Format format_named(const std::string& word) {
  for (const Format f : kFormats)
    if (word == visit_format(f, [](auto zero) { return Precision<decltype(zero)>::short_name; })) return f;
  throw InputError("--dtype: unknown format '" + word + "'");  // unreachable: the flag's choices are these
}

// A tensor of the 2-byte `format` (is_narrow), any shape, -> the same values as float32, exactly:
// each element's bits converted by the format's trait, so no hardware cast flushes or quiets them.
void widen(NpyArray& a, Format format) {
  std::vector<float> values(size_t(a.elements()));
  visit_narrow(format, [&](auto zero) {
    using P = Precision<decltype(zero)>;
    for (size_t n = 0; n < values.size(); ++n) {
      const auto bits = typename P::Bits(a.data[2 * n] | a.data[2 * n + 1] << 8);  // two little-endian bytes
      values[n] = Precision<float>::from_double(P::to_double(P::from_bits(bits)));
    }
  });
  a.dtype = NpyDtype::f32;
  a.data.resize(values.size() * sizeof(float));
  std::memcpy(a.data.data(), values.data(), a.data.size());
}

// A tensor's data as T: a [B,H,T,d] buffer (holding values of the problem's format) or the lse.
template <class T>
const T* data_of(const std::map<std::string, NpyArray>& arrays, const char* name) {
  return reinterpret_cast<const T*>(arrays.at(name).data.data());
}

// The mask broadcast to [B,H,Tq,Tk]: the allow mask [B,Tq,Tk] when every head's is the same, else
// (a mask per head, which the contract's allow mask cannot say) a bias of 0 and -inf, added to --bias.
template <class T>
struct BroadcastMask {
  std::vector<uint8_t> allow;  // empty: the mask differs between heads
  std::vector<T> head_bias;    // empty: it does not
};

// `mask` (the --allow file `file`, of mask_dims's shape) broadcast, added to `bias` (or null).
template <class T>
BroadcastMask<T> broadcast_mask(const NpyArray& mask, const std::string& file, const Shape& shape, const T* bias) {
  const std::vector<int64_t> m = mask_dims(mask.shape, shape);
  auto at = [&](int64_t b, int64_t h, int64_t i, int64_t j) {
    const int64_t index =
        ((std::min(b, m[0] - 1) * m[1] + std::min(h, m[1] - 1)) * m[2] + std::min(i, m[2] - 1)) * m[3] + std::min(j, m[3] - 1);
    return mask.data[size_t(index)] != 0;
  };
  bool per_head = false;
  for (int64_t b = 0; b < shape.B && m[1] > 1; ++b)
    for (int64_t h = 1; h < shape.H; ++h)
      for (int64_t i = 0; i < shape.Tq; ++i)
        for (int64_t j = 0; j < shape.Tk; ++j) per_head = per_head || at(b, h, i, j) != at(b, 0, i, j);
  BroadcastMask<T> broadcast;
  if (!per_head) {
    broadcast.allow.resize(size_t(shape.allow_size()));
    for (int64_t b = 0; b < shape.B; ++b)
      for (int64_t i = 0; i < shape.Tq; ++i)
        for (int64_t j = 0; j < shape.Tk; ++j) broadcast.allow[size_t(shape.allow_at(b, i) + j)] = at(b, 0, i, j);
    return broadcast;
  }
  broadcast.head_bias.resize(size_t(shape.scores_size()));
  for (int64_t b = 0; b < shape.B; ++b)
    for (int64_t h = 0; h < shape.H; ++h)
      for (int64_t i = 0; i < shape.Tq; ++i)
        for (int64_t j = 0; j < shape.Tk; ++j) {
          const size_t n = size_t(shape.scores_at(b, h, i) + j);
          broadcast.head_bias[n] = at(b, h, i, j) ? (bias ? bias[n] : T(0)) : -std::numeric_limits<T>::infinity();
        }
  std::printf("attncheck compare: %s differs between heads: checked as a bias of 0 and -inf%s\n", file.c_str(),
              bias ? " added to --bias" : "");
  return broadcast;
}

// The problem the tensors and the flags say, its mask and bias in `mask` when it has them.
template <class T>
Problem<T> problem_of(const std::map<std::string, NpyArray>& arrays, const FlagValues& options, const Shape& shape, Format format,
                      const BroadcastMask<T>& mask) {
  Problem<T> p;
  p.shape = shape;
  p.format = format;
  // Each input given, as its file holds it; the mask as broadcast (below).
  for_each_problem_input(p, [&](const Slot& s, auto& member) {
    if (auto it = arrays.find(flag_of(s)); it != arrays.end() && s.element != Element::byte)
      member = reinterpret_cast<std::remove_reference_t<decltype(member)>>(it->second.data.data());
  });
  if (!mask.allow.empty()) p.masks.allow = mask.allow.data();
  const std::string& causal = options.text("causal");
  for (Causal mode : kCausalModes)
    if (causal == kCausalNames[int(mode)]) p.masks.causal = mode;
  Policies policies;
  read_policy_flags(options, policies);
  p.empty_rows = policies.empty_rows;
  p.lse_empty = policies.lse_empty;
  if (options.given("scale")) p.scale = options.number("scale");
  if (options.given("softcap")) p.softcap = options.number("softcap");
  if (options.given("window")) std::tie(p.masks.window_left, p.masks.window_right) = window_of(options.text("window"));
  if (!mask.head_bias.empty()) p.bias = mask.head_bias.data();
  return p;
}

// Which rows the oracle computes exactly (rows.hpp): every one, or the first and last of each
// head, tile edges, padding boundaries and random ones, with every other row screened against
// attncheck's plain implementation and the rows it flags computed exactly too. The backward needs
// every row: dk and dv sum over all of them. `pairs`: the problem's query-key pairs.
template <class T>
std::vector<uint8_t> rows_computed(const Problem<T>& p, const FlagValues& options, bool backward, int64_t pairs) {
  const std::string& rows = options.text("rows");
  const int64_t asked = rows == "all" || rows == "auto" ? 0 : std::stoll(rows);
  const bool all = backward || rows == "all" || (rows == "auto" && pairs <= int64_t(options.number("sample-above"))) ||
                   asked >= p.shape.lse_size();
  const int64_t extra = rows == "auto" ? std::max<int64_t>(16, kSampledPairs / p.shape.Tk) : asked;
  std::vector<uint8_t> chosen = all ? std::vector<uint8_t>(size_t(p.shape.lse_size()), 1) : sample_rows(p, extra);
  if (!all)
    std::printf("attncheck compare: %lld query-key pairs: %s; the others screened against the plain implementation\n",
                (long long)pairs,
                rows == "auto" ? "above --sample-above, a sample of rows exactly" : "the sample --rows asks for exactly");
  return chosen;
}

// What judging the other rows says: that the precision gate needs them, when it does, and then the
// progress line's.
RowProgress other_rows(int64_t pairs) {
  const RowProgress more = progress_line("the other rows", pairs);
  return [more](int64_t done, int64_t total) {
    if (done == 0 && total > 0) {
      std::printf(
          "attncheck compare: imprecise on the sampled rows: computing the other %lld rows exactly before the "
          "verdict (the precision gate's limit needs every row)\n",
          (long long)total);
      std::fflush(stdout);
    }
    if (more) more(done, total);
  };
}

// The backward, both gates: the exact gradients with the bound of a backward run on its own
// forward's out and lse (the dumped ones came from autograd), and the built-in backward given the
// exact forward rounded, as the precision gate's reference. Whether dq, dk and dv pass (each one's
// summary added to `summaries`); the first that fails is said.
template <class T>
bool backward_passes(const Problem<T>& p, const std::map<std::string, NpyArray>& arrays, std::string& summaries) {
  const Shape& shape = p.shape;
  const GradReference<T> grads = reference_backward(p, data_of<T>(arrays, "dout"), /*own_forward=*/true);
  std::vector<T> plain_dq(size_t(shape.q_size())), plain_dk(size_t(shape.k_size())), plain_dv(size_t(shape.v_size()));
  attention_backward(p, Grads<T>{grads.out.data(), grads.lse.data(), data_of<T>(arrays, "dout"), plain_dq.data(), plain_dk.data(),
                                 plain_dv.data()});
  const std::tuple<const char*, const std::vector<T>*, const ExactTensor*> tensors[] = {
      {"dq", &plain_dq, &grads.dq}, {"dk", &plain_dk, &grads.dk}, {"dv", &plain_dv, &grads.dv}};
  for (const auto& [name, plain_grad, exact] : tensors) {
    const Verdict grad = judge(data_of<T>(arrays, name), plain_grad->data(), *exact);
    if (!grad.ok()) {
      std::printf("attncheck compare: FAIL: the backward: %s", grad.report().c_str());
      return false;
    }
    summaries += std::string("\n  ") + name + ":\n" + grad.summary();
  }
  return true;
}

template <class T>
int check(const std::map<std::string, NpyArray>& arrays, const FlagValues& options, const Shape& shape, Format format) {
  BroadcastMask<T> mask;
  if (auto it = arrays.find("allow"); it != arrays.end())
    mask = broadcast_mask(it->second, options.text("allow"), shape, arrays.count("bias") ? data_of<T>(arrays, "bias") : nullptr);
  const Problem<T> given = problem_of(arrays, options, shape, format, mask);
  std::vector<T> plain(size_t(shape.out_size())), plain_lse(size_t(shape.lse_size()));
  if (const std::string error = problem_error(given, Result<T>{plain.data()}); !error.empty()) throw InputError(error);
  // A paged or varlen call is judged on its dense twin (contract.hpp's dense_of: the same out and lse
  // buffers; a varlen call's as one batch, indices [0,h,row of the packed tensor]).
  TwinBuffers<T> twin;
  const Problem<T> p = dense_of(given, twin);
  const bool backward = arrays.count("dout") > 0;
  const int64_t pairs = p.shape.B * p.shape.H * p.shape.Tq * p.shape.Tk;
  const std::vector<uint8_t> chosen = rows_computed(p, options, backward, pairs);
  const std::vector<uint8_t> none(chosen.size(), 0);  // a reference of no row yet, to add `chosen` to

  // Both gates, as everywhere: the rigorous bound, then the precision gate against attncheck's
  // built-in implementation on the same input.
  attention(p, Result<T>{plain.data(), nullptr, plain_lse.data()});
  Reference ref = reference(p, &none);
  add_rows_in_chunks(p, chosen, ref, progress_line("the oracle's rows", pairs));
  const Verdict verdict = judge_rows(p, data_of<T>(arrays, "out"), plain.data(), ref, other_rows(pairs));
  if (!verdict.ok()) {
    std::printf("attncheck compare: FAIL: %s", verdict.report().c_str());
    return 1;
  }
  // Nothing checked is no verdict (every element outside the checkable range: a q of 3e38, NaN
  // everywhere): exit 3, never PASS.
  if (verdict.bound.checked == 0) {
    std::printf("attncheck compare: NO VERDICT: %s\n", verdict.bound.summary().c_str());
    return 3;
  }
  std::string summaries = verdict.summary();
  // The log-sum-exp, when given: judged on the rows the output's verdict computed.
  if (arrays.count("lse")) {
    const Verdict lse = judge(data_of<T>(arrays, "lse"), plain_lse.data(), ref.lse);
    if (!lse.ok()) {
      std::printf("attncheck compare: FAIL: the log-sum-exp: %s", lse.report().c_str());
      return 1;
    }
    summaries += "\n  lse:\n" + lse.summary();
  }
  if (backward && !backward_passes(p, arrays, summaries)) return 1;
  std::printf("attncheck compare: PASS (%s)\n%s\n", verdict.label, summaries.c_str());
  return 0;
}

// The flags that need no file: --rows, and the backward's: --dout and the three gradients computed
// from it, all or none; its empty rows are zero (dq 0, nothing to any key), the only policy its
// oracle knows.
void check_flags(const FlagValues& options) {
  const std::string& rows = options.text("rows");
  if (rows != "all" && rows != "auto" &&
      (rows.find_first_not_of("0123456789") != std::string::npos || rows.size() > 12 || std::stoll(rows) < 1))
    throw InputError("--rows: expected all, auto or a positive number of rows, got '" + rows + "'");
  std::string missing;
  bool any = false;
  for (const Slot* g : compared_slots())
    if (a_gradient(*g)) {
      any |= options.given(flag_of(*g));
      if (!options.given(flag_of(*g))) missing += (missing.empty() ? "--" : ", --") + flag_of(*g);
    }
  if (any && !missing.empty()) throw InputError("the backward needs --dout, --dq, --dk and --dv: missing " + missing);
  const bool varlen = options.given("cu-seqlens-q") || options.given("cu-seqlens-k");
  if (varlen && !(options.given("cu-seqlens-q") && options.given("cu-seqlens-k")))
    throw InputError("varlen: give both --cu-seqlens-q and --cu-seqlens-k");
  if (any && (varlen || options.given("block-table")))
    throw InputError("--dout: the backward of a paged or varlen call is not checked; give its dense tensors");
  if (varlen && (options.given("allow") || options.given("kv-lens") || options.given("bias") || options.given("block-table") ||
                 options.text("causal") == causal_name(Causal::kv_end)))
    throw InputError("varlen: packed sequences take no --allow, --kv-lens, --bias, --block-table or --causal kv-end");
  if (options.given("dout") && options.text("empty-rows") != "zero")
    throw InputError("--empty-rows " + options.text("empty-rows") +
                     ": the backward's empty rows are zero (dq 0, nothing to any key); "
                     "leave it out with --dout");
}

// The tensors' format: one for q, k, v, bias, out and the gradients, --dtype's or else q's; the lse
// in float32 (float64 for float64 tensors), as a kernel keeps it.
Format format_checked(const std::map<std::string, NpyArray>& arrays, const FlagValues& options) {
  const bool bf16_bits = options.given("dtype") && options.text("dtype") == "bf16";
  const Format format =
      options.given("dtype") ? format_named(options.text("dtype")) : format_of(arrays.at("q"), options.text("q"), bf16_bits);
  const std::string said = options.given("dtype") ? "--dtype " + options.text("dtype") + " says " : options.text("q") + " is ";
  for (const Slot* s : compared_slots()) {
    const auto given = arrays.find(flag_of(*s));
    if (given == arrays.end()) continue;
    const std::string& file = options.text(flag_of(*s));
    if (s->element == Element::format)
      if (const Format f = format_of(given->second, file, bf16_bits); f != format)
        throw InputError(file + ": " + format_name(f) + ", but " + said + format_name(format) +
                         " (q, k, v, bias, out and the gradients must be in one format)");
    const NpyDtype wide = format == Format::f64 ? NpyDtype::f64 : NpyDtype::f32;
    if (s->element == Element::wide && given->second.dtype != wide)
      throw InputError(file + ": dtype " + dtype_name(given->second.dtype) + ", expected " + dtype_name(wide) + " for " +
                       format_name(format) + " tensors");
    if (s->element == Element::f32 && given->second.dtype != NpyDtype::f32)
      throw InputError(file + ": dtype " + dtype_name(given->second.dtype) + ", expected float32 in every format");
    if (s->element == Element::int32 && given->second.dtype != NpyDtype::i32)
      throw InputError(file + ": dtype " + dtype_name(given->second.dtype) + ", expected int32");
  }
  return format;
}

// The block table's [B,BPS] header: its BPS (its B is checked with the other optional tensors).
int64_t table_width(const NpyArray& table, const std::string& file) {
  if (table.shape.size() != 2 || table.shape[1] < 1) throw InputError(file + ": expected shape [B,BPS]");
  return table.shape[1];
}

// A varlen call's packed tensor's dims, [T,d] or [H,T,d] ([T,H,d] with --layout bshd), as one
// batch's: [1,1,T,d] or [1,H,T,d] ([1,T,1,d] or [1,T,H,d]), so that the dense reading and --layout serve them.
std::vector<int64_t> one_batch(std::vector<int64_t> dims, bool bshd) {
  if (dims.size() == 2) dims.insert(dims.begin() + (bshd ? 1 : 0), 1);
  dims.insert(dims.begin(), 1);
  return dims;
}
void as_one_batch(std::map<std::string, NpyArray>& arrays, const FlagValues& options, bool bshd) {
  if (!arrays.count("cu-seqlens-q")) return;
  for (const Slot* s : compared_slots())
    if (const auto given = arrays.find(flag_of(*s)); rows_per_head(*s) && given != arrays.end()) {
      std::vector<int64_t>& dims = given->second.shape;
      if (dims.size() != 2 && dims.size() != 3)
        throw InputError(options.text(flag_of(*s)) + ": has " + std::to_string(dims.size()) +
                         " dims; a varlen call's packed tensor is [T,d] or [H,T,d] ([T,H,d] with --layout bshd)");
      dims = one_batch(dims, bshd);
    }
}

// The problem's shape, from the headers of q, k, v, out and the gradients: Q [B,H,Tq,dk], K
// [B,H,Tk,dk], V [B,H,Tk,dv], out [B,H,Tq,dv], the same rank; read as [B,T,H,d] when `bshd`.
Shape shape_checked(const std::map<std::string, NpyArray>& arrays, const FlagValues& options, bool bshd) {
  auto dims = [&](const char* name, bool as_bshd) { return dims_of(arrays.at(name), options.text(name), as_bshd); };
  const FileDims q = dims("q", bshd), out = dims("out", bshd);
  FileDims k = dims("k", bshd), v = dims("v", bshd);
  // Paged: K and V are pools [NB,H_kv,BS,d], each sequence's keys the BPS x BS slots its table names.
  const FileDims pool = k;
  const int64_t BPS = arrays.count("block-table") ? table_width(arrays.at("block-table"), options.text("block-table")) : 0;
  if (BPS) {
    if (v.B != pool.B || v.T != pool.T)
      throw InputError("paged KV: K " + shape_text(pool) + " and V " + shape_text(v) + " are not pools of the same blocks");
    k.B = v.B = q.B, k.T = v.T = BPS * pool.T;
  }
  for (const Slot* s : compared_slots())
    if (const auto given = arrays.find(flag_of(*s)); rows_per_head(*s) && given != arrays.end())
      if (given->second.shape.size() != arrays.at("q").shape.size())
        throw InputError(options.text(flag_of(*s)) + ": has " + std::to_string(given->second.shape.size()) + " dims, --q has " +
                         std::to_string(arrays.at("q").shape.size()));
  // K and V may have fewer heads than Q (grouped-query attention): H_kv dividing H. Shapes that fit
  // only in the other layout say so.
  if (!fits(q, k, v, out)) {
    const bool other =
        arrays.at("q").shape.size() == 4 && fits(dims("q", !bshd), dims("k", !bshd), dims("v", !bshd), dims("out", !bshd));
    throw InputError("shapes do not fit: Q " + shape_text(q) + ", K " + shape_text(k) + ", V " + shape_text(v) + ", out " +
                     shape_text(out) +
                     " (need Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], out [B,H,Tq,dv], H_kv dividing H)" +
                     (other ? bshd ? "; they fit as [B,H,T,d]: --layout bhsd" : "; they fit as [B,T,H,d]: --layout bshd" : ""));
  }
  // The gradients: each the shape of what it differentiates (dout of out), in the same rank.
  for (const Slot* g : compared_slots()) {
    const std::string name = flag_of(*g), like = differentiated(*g);
    if (a_gradient(*g) && arrays.count(name) && arrays.at(name).shape != arrays.at(like).shape)
      throw InputError(options.text(name) + ": shape " + shape_text(dims(name.c_str(), bshd)) + ", expected " + like + "'s " +
                       axes(*g) + " = " + shape_text(dims(like.c_str(), bshd)));
  }
  Shape shape{q.B, q.H, q.T, k.T, q.d, v.d, k.H};
  if (BPS) shape.NB = pool.B, shape.BS = pool.T, shape.BPS = BPS;
  if (arrays.count("cu-seqlens-q")) {  // B sequences packed in the one batch read
    const std::vector<int64_t>& cu = arrays.at("cu-seqlens-q").shape;
    if (cu.size() != 1 || cu[0] < 2) throw InputError(options.text("cu-seqlens-q") + ": expected shape [B+1], B >= 1");
    shape.B = cu[0] - 1, shape.varlen = true;
  }
  return shape;
}

// The optional tensors, by element count and last dims: kv-lens [B] int32, bias [..,Tq,Tk] with B H
// Tq Tk elements, lse [..,Tq] with B H Tq, the mask by mask_dims; and the shape and --softcap within
// what the oracle takes.
void check_optional_shapes(const std::map<std::string, NpyArray>& arrays, const FlagValues& options, const Shape& shape) {
  // The others but the mask: each its element count, its file's last dims those of the slot after
  // its leading B and H (or H_kv), or all of them when that leaves none (kv_lens [B]).
  const Dims dims = dims_of(shape);
  for (const Slot* s : compared_slots()) {
    const auto given = arrays.find(flag_of(*s));
    if (given == arrays.end() || rows_per_head(*s) || s->element == Element::byte) continue;
    std::vector<int64_t> all, last;
    for (int a = 0; a < s->shape.rank; ++a) all.push_back(dims[s->shape.dims[a]]);
    int lead = 0;
    while (lead < s->shape.rank &&
           (s->shape.dims[lead] == Dim::B || s->shape.dims[lead] == Dim::H || s->shape.dims[lead] == Dim::H_kv))
      ++lead;
    last.assign(all.begin() + (lead < s->shape.rank ? lead : 0), all.end());
    const std::vector<int64_t>& got = given->second.shape;
    const bool tail = got.size() >= last.size() && std::equal(last.rbegin(), last.rend(), got.rbegin());
    if (given->second.elements() != elements(*s, dims) || !tail) {
      std::string values;
      for (int64_t n : all) values += (values.empty() ? "" : ",") + std::to_string(n);
      throw InputError(options.text(flag_of(*s)) + ": expected shape " + axes(*s) + " = [" + values + "]");
    }
  }
  if (auto it = arrays.find("allow"); it != arrays.end()) {
    const NpyArray& mask = it->second;
    if (mask.dtype != NpyDtype::b1 && mask.dtype != NpyDtype::u8)
      throw InputError(options.text("allow") + ": dtype " + dtype_name(mask.dtype) + ", expected bool or uint8");
    if (mask_dims(mask.shape, shape).empty())
      throw InputError(options.text("allow") +
                       ": expected shape [Tq,Tk], [B,Tq,Tk] or [B,H,Tq,Tk] (each of B, H, Tq, Tk "
                       "itself or 1) = [" +
                       std::to_string(shape.B) + "," + std::to_string(shape.H) + "," + std::to_string(shape.Tq) + "," +
                       std::to_string(shape.Tk) + "]");
  }
  Problem<float> probe;  // only for problem_error's size limits and the options' ranges
  probe.shape = shape;
  if (options.given("softcap")) probe.softcap = options.number("softcap");
  if (const std::string error = problem_error(probe, Result<float>{});
      error.rfind("shape", 0) == 0 || error.rfind("softcap", 0) == 0)
    throw InputError(error);
}

// The shapes fit: now the data, each file's header as read before, and the key lengths in 0..Tk.
void read_data(std::map<std::string, NpyArray>& arrays, const FlagValues& options, const Shape& shape) {
  for (auto& [name, array] : arrays) {
    NpyArray whole = read_npy(options.text(name));
    if (whole.shape.size() < array.shape.size())
      whole.shape = one_batch(whole.shape, options.text("layout") == "bshd");  // as_one_batch's
    if (whole.dtype != array.dtype || whole.shape != array.shape)
      throw InputError(options.text(name) + ": changed while being read");
    array = std::move(whole);
  }
  if (arrays.count("kv-lens")) {
    const NpyArray& lens = arrays.at("kv-lens");
    for (int64_t b = 0; b < shape.B; ++b) {
      const int32_t n = reinterpret_cast<const int32_t*>(lens.data.data())[b];
      if (n < 0 || n > shape.Tk)
        throw InputError(options.text("kv-lens") + ": length " + std::to_string(n) + " of batch " + std::to_string(b) +
                         " is outside 0..Tk = " + std::to_string(shape.Tk));
    }
  }
}

int run(const FlagValues& options) {
  check_flags(options);
  // Every header first, and every check of dtypes and shapes on them, before any data is read: a
  // small file whose header claims 2^31 elements costs nothing until the shapes are known to fit.
  std::map<std::string, NpyArray> arrays;
  for (const Slot* s : compared_slots())
    if (options.given(flag_of(*s))) arrays.emplace(flag_of(*s), read_npy_header(options.text(flag_of(*s))));
  if (options.given("window")) window_of(options.text("window"));  // a bad window: one line, before any work
  const Format format = format_checked(arrays, options);
  const bool bshd = options.text("layout") == "bshd";
  as_one_batch(arrays, options, bshd);
  const Shape shape = shape_checked(arrays, options, bshd);
  check_optional_shapes(arrays, options, shape);
  read_data(arrays, options, shape);
  for (const Slot* s : compared_slots()) {
    const auto given = arrays.find(flag_of(*s));
    if (given == arrays.end()) continue;
    NpyArray& a = given->second;
    if (bshd && rows_per_head(*s))  // the mask, the bias and the lse have no T,H axes to swap
      to_bhsd(a, a.data.size() / size_t(a.elements()));
    // A 2-byte format is checked as its values held in float, the problem saying the format.
    if (is_narrow(format) && s->element == Element::format) widen(a, format);
  }
  return format == Format::f64 ? check<double>(arrays, options, shape, format) : check<float>(arrays, options, shape, format);
}

}  // namespace

int compare_command(const std::vector<std::string>& args) {
  Flags flags("compare");
  flags
      .text("q", "Q.npy",
            "the queries: [Tq,dk], [B,Tq,dk] or [B,H,Tq,dk]; float32, float64, float16, or bfloat16 "
            "bit patterns as uint16/int16 with --dtype bf16")
      .required()
      .text("k", "K.npy", "the keys: [Tk,dk], [B,Tk,dk] or [B,H_kv,Tk,dk] (H_kv dividing H: grouped heads), the format of --q")
      .required()
      .text("v", "V.npy", "the values: [Tk,dv], [B,Tk,dv] or [B,H_kv,Tk,dv], the format of --q")
      .required()
      .text("out", "OUT.npy", "the output to check: [Tq,dv], [B,Tq,dv] or [B,H,Tq,dv], the format of --q")
      .required()
      .text("allow", "MASK.npy",
            "which keys each query may attend (true = may), bool or uint8: [Tq,Tk], [B,Tq,Tk], or [B,H,Tq,Tk] with any of "
            "them 1 (broadcast, as PyTorch's and JAX's masks); one that differs between heads is checked as a bias of 0 "
            "and -inf")
      .choice("layout", {"bhsd", "bshd"},
              "how 4-D q, k, v, out and the gradients are laid out: [B,H,T,d] (PyTorch), or [B,T,H,d] (JAX, "
              "FlashAttention, transformers); the mask, bias and lse are [B,H,Tq,Tk] and [B,H,Tq] either way",
              "bhsd")
      .choice("causal", {std::begin(kCausalNames), std::end(kCausalNames)},
              "the causal mask: key j <= i, j <= i + Tk - Tq, or j <= i + kv_lens[b] - Tq", "none")
      .number("scale", "S", "the scores' scale; 1/sqrt(dk) when absent")
      .text("window", "L,R",
            "a sliding window, FlashAttention's inclusive convention: key j within i + Tk - Tq - L .. i + Tk - Tq + R; -1 = "
            "unbounded")
      .number("softcap", "C", "a soft-cap: score = C tanh(scale q.k / C), before bias and masks", std::nullopt, 0, 1e300)
      .text("kv-lens", "LENS.npy", "key lengths [B], int32: keys j >= LENS[b] are padding")
      .text("sinks", "SINKS.npy",
            "attention sinks [H], float32 in every format (gpt-oss): each row's denominator gains exp(SINKS[h] - max), "
            "with no value; -inf is no sink")
      .text("block-table", "TABLE.npy",
            "paged KV: the block table [B,BPS], int32; --k and --v are then pools [NB,H_kv,BS,dk] and [NB,H_kv,BS,dv] "
            "([NB,BS,H_kv,d] with --layout bshd), key j of batch b in slot j % BS of block TABLE[b][j / BS]; Tk is "
            "BPS x BS, --kv-lens each sequence's keys")
      .text("cu-seqlens-q", "CU.npy",
            "varlen: the B sequences' first query rows [B+1], int32, from 0 to the total; q and out are then packed, "
            "[Tq,d] or [H,Tq,d] ([Tq,H,d] with --layout bshd), the lse [H,Tq]; needs --cu-seqlens-k")
      .text("cu-seqlens-k", "CU.npy",
            "varlen: the sequences' first key rows [B+1], int32; k and v packed as q; --causal and --window apply "
            "within each sequence")
      .text("bias", "BIAS.npy", "a bias [B,H,Tq,Tk] in --q's format, added after the soft-cap; -inf forbids")
      .text("lse", "LSE.npy",
            "the log-sum-exp to check too: [B,H,Tq], float32 (float64 with float64 tensors), natural log, -inf for an "
            "empty row")
      .text("dout", "DOUT.npy",
            "checks the backward too: the output's gradient it was given, [Tq,dv], [B,Tq,dv] or [B,H,Tq,dv] as "
            "--out, the format of --q; needs --dq, --dk and --dv, and empty rows zero")
      .text("dq", "DQ.npy", "the backward's query gradient to check: [Tq,dk], [B,Tq,dk] or [B,H,Tq,dk] as --q, its format")
      .text("dk", "DK.npy",
            "the backward's key gradient to check: [Tk,dk], [B,Tk,dk] or [B,H_kv,Tk,dk] as --k (with grouped heads "
            "summed over the H / H_kv query heads of each KV head), the format of --q")
      .text("dv", "DV.npy",
            "the backward's value gradient to check: [Tk,dv], [B,Tk,dv] or [B,H_kv,Tk,dv] as --v (summed over each "
            "group like --dk), the format of --q")
      .choice("dtype", {"f32", "f64", "f16", "bf16"},
              "the format of q, k, v, bias, out and the gradients; when absent, --q's (f32, f64, f16). bf16: uint16 "
              "or int16 files of bfloat16 bits, as PyTorch's t.view(torch.int16).numpy() writes them")
      .text("rows", "all|auto|N",
            "rows the oracle computes exactly: all; auto (all up to --sample-above query-key pairs, else a sample); "
            "or a sample of N beyond the first and last of each head. The others are screened. With --dout every "
            "row: the backward's dk and dv sum over all of them",
            "auto")
      .number("sample-above", "PAIRS", "with --rows auto: sample above this many query-key pairs (B H Tq Tk)", "16777216", 1,
              1e18);
  return policy_flags(flags, false).run(args, run);  // an input error (InputError, NpyError, out of memory) is one line too
}

}  // namespace attncheck
