// attncheck compare: checks tensors dumped from PyTorch or anywhere else against the oracle.
#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>

#include "attncheck/attention.hpp"
#include "attncheck/commands.hpp"
#include "attncheck/compare.hpp"
#include "attncheck/flags.hpp"
#include "attncheck/npy.hpp"
#include "attncheck/oracle.hpp"
#include "attncheck/rows.hpp"

namespace attncheck {
namespace {

// Every input fault: one line, exit 2.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A tensor's shape read as [B,H,T,d] from [T,d], [B,T,d] or [B,H,T,d].
struct Dims {
  int64_t B, H, T, d;
};

Dims dims_of(const NpyArray& a, const std::string& name) {
  const auto& s = a.shape;
  if (s.size() < 2 || s.size() > 4)
    throw InputError(name + ": expected shape [T,d], [B,T,d] or [B,H,T,d], got " + std::to_string(s.size()) + " dims");
  for (int64_t dim : s)
    if (dim < 1) throw InputError(name + ": every dimension must be at least 1");
  const size_t r = s.size();
  return {r >= 3 ? s[0] : 1, r == 4 ? s[1] : 1, s[r - 2], s[r - 1]};
}

std::string shape_text(const Dims& d) {
  return "[" + std::to_string(d.B) + "," + std::to_string(d.H) + "," + std::to_string(d.T) + "," + std::to_string(d.d) + "]";
}

template <class T>
int check(const std::map<std::string, NpyArray>& arrays, const FlagValues& options, const Shape& shape) {
  // q, k, v, out: [B,H,T,d] buffers of T in the arrays; allow [B,Tq,Tk] after broadcasting.
  auto data = [&](const char* name) { return reinterpret_cast<const T*>(arrays.at(name).data.data()); };
  Problem<T> p;
  p.shape = shape;
  p.q = data("q");
  p.k = data("k");
  p.v = data("v");
  std::vector<uint8_t> allow;
  if (auto it = arrays.find("allow"); it != arrays.end()) {
    const NpyArray& mask = it->second;
    const int64_t per_batch = shape.Tq * shape.Tk;
    allow.resize(size_t(shape.B * per_batch));
    for (int64_t n = 0; n < shape.B * per_batch; ++n)
      allow[size_t(n)] = mask.data[size_t(mask.elements() == per_batch ? n % per_batch : n)] != 0;
    p.masks.allow = allow.data();
  }
  const std::string& causal = options.text("causal");
  p.masks.causal = causal == "none" ? Causal::none : causal == "upper-left" ? Causal::upper_left : Causal::lower_right;
  p.empty_rows = options.text("empty-rows") == "nan" ? EmptyRows::nan : EmptyRows::zero;
  if (options.given("scale")) p.scale = options.number("scale");

  // Which rows the oracle computes exactly (rows.hpp): every one, or the first and last of each
  // head, tile edges, padding boundaries and random ones, with every other row screened against
  // attncheck's plain implementation and the rows it flags computed exactly too.
  const std::string& rows = options.text("rows");
  const int64_t pairs = shape.B * shape.H * shape.Tq * shape.Tk;
  const int64_t asked = rows == "all" || rows == "auto" ? 0 : std::stoll(rows);
  const bool all = rows == "all" || (rows == "auto" && pairs <= int64_t(options.number("sample-above"))) ||
                   asked >= shape.lse_size();
  const int64_t extra = rows == "auto" ? std::max<int64_t>(16, kSampledPairs / shape.Tk) : asked;
  const std::vector<uint8_t> chosen = all ? std::vector<uint8_t>(size_t(shape.lse_size()), 1) : sample_rows(p, extra);
  if (!all)
    std::printf("attncheck compare: %lld query-key pairs: %s; the others screened against the plain implementation\n",
                (long long)pairs,
                rows == "auto" ? "above --sample-above, a sample of rows exactly" : "the sample --rows asks for exactly");

  // Both gates, as everywhere: the rigorous bound, then the precision gate against attncheck's
  // built-in implementation on the same input.
  std::vector<T> plain(size_t(shape.out_size()));
  attention(p, Result<T>{plain.data()});
  Reference ref = reference(p, &chosen);
  const Verdict verdict = judge_rows(p, data("out"), plain.data(), ref);
  if (!verdict.ok()) {
    std::printf("attncheck compare: FAIL: %s", verdict.report().c_str());
    return 1;
  }
  std::printf("attncheck compare: PASS (%s)\n%s\n", verdict.label, verdict.summary().c_str());
  return 0;
}

int run(const FlagValues& options) {
  const std::string& rows = options.text("rows");
  if (rows != "all" && rows != "auto" &&
      (rows.find_first_not_of("0123456789") != std::string::npos || rows.size() > 12 || std::stoll(rows) < 1))
    throw InputError("--rows: expected all, auto or a positive number of rows, got '" + rows + "'");
  std::map<std::string, NpyArray> arrays;
  for (const char* name : {"q", "k", "v", "out", "allow"})
    if (options.given(name)) arrays.emplace(name, read_npy(options.text(name)));

  // Dtypes: one float type for the four tensors; bool or uint8 for the mask.
  const NpyDtype dtype = arrays.at("q").dtype;
  for (const char* name : {"q", "k", "v", "out"}) {
    const NpyArray& a = arrays.at(name);
    if (a.dtype != NpyDtype::f32 && a.dtype != NpyDtype::f64)
      throw InputError(options.text(name) + ": dtype " + dtype_name(a.dtype) + ", expected float32 or float64");
    if (a.dtype != dtype)
      throw InputError(options.text(name) + ": dtype " + dtype_name(a.dtype) + " differs from --q's " + dtype_name(dtype));
  }

  // Shapes: Q [B,H,Tq,dk], K [B,H,Tk,dk], V [B,H,Tk,dv], out [B,H,Tq,dv], the same rank.
  const Dims q = dims_of(arrays.at("q"), options.text("q")), k = dims_of(arrays.at("k"), options.text("k")),
             v = dims_of(arrays.at("v"), options.text("v")), out = dims_of(arrays.at("out"), options.text("out"));
  for (const char* name : {"k", "v", "out"})
    if (arrays.at(name).shape.size() != arrays.at("q").shape.size())
      throw InputError(options.text(name) + ": has " + std::to_string(arrays.at(name).shape.size()) + " dims, --q has " +
                       std::to_string(arrays.at("q").shape.size()));
  const bool consistent = k.B == q.B && v.B == q.B && out.B == q.B && k.H == q.H && v.H == q.H && out.H == q.H &&
                          k.d == q.d && v.T == k.T && out.T == q.T && out.d == v.d;
  if (!consistent)
    throw InputError("shapes do not fit: Q " + shape_text(q) + ", K " + shape_text(k) + ", V " + shape_text(v) +
                     ", out " + shape_text(out) + " (need Q [B,H,Tq,dk], K [B,H,Tk,dk], V [B,H,Tk,dv], out [B,H,Tq,dv])");
  const Shape shape{q.B, q.H, q.T, k.T, q.d, v.d};

  if (auto it = arrays.find("allow"); it != arrays.end()) {
    const NpyArray& mask = it->second;
    if (mask.dtype != NpyDtype::b1 && mask.dtype != NpyDtype::u8)
      throw InputError(options.text("allow") + ": dtype " + dtype_name(mask.dtype) + ", expected bool or uint8");
    const bool per_query = mask.shape == std::vector<int64_t>{shape.Tq, shape.Tk};
    const bool per_batch = mask.shape == std::vector<int64_t>{shape.B, shape.Tq, shape.Tk};
    if (!per_query && !per_batch)
      throw InputError(options.text("allow") + ": expected shape [Tq,Tk] or [B,Tq,Tk] = [" + std::to_string(shape.Tq) +
                       "," + std::to_string(shape.Tk) + "] or [" + std::to_string(shape.B) + "," +
                       std::to_string(shape.Tq) + "," + std::to_string(shape.Tk) + "]");
  }
  Problem<float> probe;  // only for problem_error's size limits
  probe.shape = shape;
  if (const std::string error = problem_error(probe, Result<float>{}); error.rfind("shape", 0) == 0) throw InputError(error);
  return dtype == NpyDtype::f32 ? check<float>(arrays, options, shape) : check<double>(arrays, options, shape);
}

}  // namespace

int compare_command(const std::vector<std::string>& args) {
  return Flags("compare")
      .text("q", "Q.npy", "the queries: [Tq,dk], [B,Tq,dk] or [B,H,Tq,dk], float32 or float64")
      .required()
      .text("k", "K.npy", "the keys: [Tk,dk], [B,Tk,dk] or [B,H,Tk,dk], the dtype of --q")
      .required()
      .text("v", "V.npy", "the values: [Tk,dv], [B,Tk,dv] or [B,H,Tk,dv], the dtype of --q")
      .required()
      .text("out", "OUT.npy", "the output to check: [Tq,dv], [B,Tq,dv] or [B,H,Tq,dv], the dtype of --q")
      .required()
      .text("allow", "MASK.npy", "which keys each query may attend (true = may): [Tq,Tk] or [B,Tq,Tk], bool or uint8")
      .choice("causal", {"none", "upper-left", "lower-right"}, "the causal mask: key j <= i, or j <= i + Tk - Tq", "none")
      .number("scale", "S", "the scores' scale; 1/sqrt(dk) when absent")
      .choice("empty-rows", {"zero", "nan"}, "what a row with no permitted key must be", "zero")
      .text("rows", "all|auto|N",
            "rows the oracle computes exactly: all; auto (all up to --sample-above query-key pairs, else a sample); "
            "or a sample of N beyond the first and last of each head. The others are screened",
            "auto")
      .number("sample-above", "PAIRS", "with --rows auto: sample above this many query-key pairs (B H Tq Tk)", "16777216",
              1, 1e18)
      .run(args, run);  // an input error (InputError, NpyError, out of memory) is one line too
}

}  // namespace attncheck
