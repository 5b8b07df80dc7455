#include "attncheck/finding_view.hpp"

#include <algorithm>
#include <exception>
#include <initializer_list>
#include <utility>

#include "attncheck/case_text.hpp"
#include "attncheck/cases.hpp"
#include "attncheck/compare.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck {
namespace {

// A case of at most this many queries and keys, whose q, k, v and bias hold at most this many values
// together, is shown in full; a larger one as each tensor's range and the failing row's values.
constexpr int64_t kFullLength = 32, kFullValues = 4096;

// The call shown: its problem as case text (case_text.hpp), the kernel's out [B,H,Tq,dv] on it
// (empty: no output) and why there is none; `which` says where it came from.
struct Call {
  std::string text, which, fault;
  std::vector<double> out;
};

// The campaign keeps no output: the property runs once more on the finding, keeping its kernel
// calls (not after a hang, which would cost the whole case timeout again). Shown is the call that
// `attncheck repro` writes, the first the oracle calls wrong (first_wrong_call): the problem the
// kernel got wrong, which a property may have built from its case (an emptied row, a permutation,
// a poisoned key); when each is right (a broken relation), the last. With no call, the finding's
// own case without output.
Call call_shown(const CampaignOptions& options, const Finding& finding) {
  Call shown{finding.case_text.empty() ? finding.last_call_case : finding.case_text,
             "the finding's case",
             "was not called on it when the property ran again",
             {}};
  if (finding.message.rfind("the implementation hung", 0) == 0) shown.fault = "hung";
  if (shown.text.empty() || shown.fault == "hung") return shown;
  std::vector<KernelCall> calls;
  try {
    replay(options, finding, &calls);
  } catch (const std::exception& e) {
    shown.fault = std::string("could not be run again: ") + e.what();
    return shown;
  }
  if (calls.empty()) return shown;
  const WrongCall wrong = first_wrong_call(calls);
  const size_t at = std::min(wrong.index, calls.size() - 1);
  shown.text = calls[at].case_text;
  shown.fault = calls[at].fault;
  shown.out = calls[at].out;
  shown.which = calls.size() == 1
                    ? "the problem the kernel was given"
                    : "call " + std::to_string(at + 1) + " of the " + std::to_string(calls.size()) + " the property made, " +
                          (wrong.index < calls.size() ? "the first the oracle calls wrong" : "the last");
  return shown;
}

// x (any tensor) widened to double, value for value: exact for every format.
template <class T>
std::vector<double> widened(const std::vector<T>& x) {
  return {x.begin(), x.end()};
}

// error/bound of a computed x against the exact e: within the bound, 0 to 1; outside it, above 1,
// +inf for a wrong special value; NaN where the bound is infinite (T's range cannot hold the
// computation).
double error_ratio(double x, long double e, double bound) {
  if (std::isinf(bound)) return double(NAN);
  const double error = double(std::fabs((long double)x - e)) / bound;
  if (within_bound(x, e, bound)) return std::isfinite(error) ? error : 0.0;  // a special value matched, or bound 0
  return std::isfinite(error) && error > 1 ? error : double(INFINITY);
}

// The slice's cells, per query shown: out [B,H,Tq,dv] (the kernel's) and the exact rows [rows] in;
// the slice's out, exact, bound and error/bound [rows][dv], permitted and weights [rows][Tk] out.
template <class T>
void fill_cells(const Case<T>& c, const std::vector<T>& out, const std::vector<ExactRow>& exact, SliceView& slice) {
  const Shape& s = c.shape;
  for (size_t r = 0; r < slice.rows.size(); ++r) {
    const ExactRow& row = exact[r];
    slice.exact.emplace_back(row.out.begin(), row.out.end());
    slice.bound.push_back(row.bound);
    slice.weights.emplace_back(size_t(s.Tk), 0.0);
    for (size_t n = 0; n < row.keys.size(); ++n) slice.weights.back()[size_t(row.keys[n])] = double(row.weights[n]);
    slice.permitted.emplace_back();
    for (int64_t j = 0; j < s.Tk; ++j) slice.permitted.back().push_back(c.permits(slice.b, slice.rows[r], j));
    if (!slice.have_out) continue;
    slice.out.emplace_back();
    slice.ratio.emplace_back();
    for (int64_t col = 0; col < s.dv; ++col) {
      const double x = double(out[size_t(s.out_at(slice.b, slice.h, slice.rows[r]) + col)]);
      slice.out.back().push_back(x);
      slice.ratio.back().push_back(error_ratio(x, row.out[size_t(col)], row.bound[size_t(col)]));
    }
  }
}

// The slice of a finding's problem its section shows: q [B,H,Tq,dk], k [B,H_kv,Tk,dk],
// v [B,H_kv,Tk,dv], allow [B,Tq,Tk], bias [B,H,Tq,Tk] (in c) and the kernel's out [B,H,Tq,dv]
// (empty: none) in; the oracle's rows of the queries shown, exact [rows], out with the slice.
template <class T>
SliceView slice_shown(const Case<T>& c, const std::vector<T>& out, std::vector<ExactRow>& exact) {
  const Shape& s = c.shape;
  // With dropout, the weights before it (the oracle computes dropout only for a kernel's mask, and
  // no dropout call is shown with its out: judged, diagnosis.hpp).
  Problem<T> problem = c.problem();
  problem.dropout_p = 0;
  SliceView slice;
  slice.have_out = !out.empty() && c.dropout_p == 0;
  Comparison compared;
  if (slice.have_out) compared = compare(out.data(), reference(problem).out);
  slice.all_within = compared.mismatches.empty();
  // The slice and row shown: the first element outside the bound, else the least accurate one.
  const Mismatch& focus = compared.mismatches.empty() ? compared.worst : compared.mismatches.front();
  slice.b = focus.at[0];
  slice.h = focus.at[1];
  slice.i = focus.at[2];
  const int64_t first = std::clamp(slice.i - kShownRows / 2, int64_t(0), std::max(int64_t(0), s.Tq - kShownRows));
  for (int64_t r = first; r < std::min(s.Tq, first + kShownRows); ++r) {
    slice.rows.push_back(r);
    exact.push_back(exact_row(problem, slice.b, slice.h, r));
  }
  slice.where = "batch " + std::to_string(slice.b) + ", head " + std::to_string(slice.h);
  fill_cells(c, out, exact, slice);
  return slice;
}

// A tensor's spread: x (any shape, `shape` its dims as numbers) in.
template <class T>
Spread spread(const char* name, const std::string& shape, const std::vector<T>& x) {
  Spread spread{name, shape, x.size()};
  for (T e : x) {
    spread.nans += std::isnan(e);
    spread.infinities += std::isinf(e);
    if (std::isfinite(e)) {
      spread.low = std::min(spread.low, double(e));
      spread.high = std::max(spread.high, double(e));
    }
  }
  return spread;
}

// A large case's tensors as spreads: q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv],
// bias [B,H,Tq,Tk] or empty, and the kernel's out [B,H,Tq,dv] when the slice has it.
template <class T>
std::vector<Spread> spreads(const Case<T>& c, const std::vector<T>& out, bool have_out) {
  const Shape& s = c.shape;
  auto dims = [](std::initializer_list<int64_t> d) {
    std::string text;
    for (int64_t n : d) text += (text.empty() ? "[" : ",") + std::to_string(n);
    return text + "]";
  };
  std::vector<Spread> all = {spread("q", dims({s.B, s.H, s.Tq, s.dk}), c.q),
                             spread("k", dims({s.B, s.kv_heads(), s.Tk, s.dk}), c.k),
                             spread("v", dims({s.B, s.kv_heads(), s.Tk, s.dv}), c.v)};
  if (!c.bias.empty()) all.push_back(spread("bias", dims({s.B, s.H, s.Tq, s.Tk}), c.bias));
  if (have_out) all.push_back(spread("out (computed)", dims({s.B, s.H, s.Tq, s.dv}), out));
  return all;
}

// A large case's failing row: q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv] (in c) and the
// failing query's exact row in; its q row [dk] and the (at most 8) keys of most weight, each with
// its k row [dk] and v row [dv], into the view.
template <class T>
void failing_row(const Case<T>& paged, const ExactRow& row, ProblemView& view) {
  const Case<T> c = dense_twin(paged);  // its keys as the row reads them
  const Shape& s = c.shape;
  const int64_t b = view.slice.b, h = view.slice.h, i = view.slice.i;
  for (int64_t d = 0; d < s.dk; ++d) view.failing_q.push_back(double(c.q[size_t(s.q_at(b, h, i) + d)]));
  std::vector<size_t> order(row.keys.size());
  for (size_t n = 0; n < order.size(); ++n) order[n] = n;
  const size_t heaviest_keys = std::min<size_t>(order.size(), 8);
  // Ordered by the weights as the oracle holds them (long double): keys whose weights round to one
  // double keep their order.
  std::partial_sort(order.begin(), order.begin() + long(heaviest_keys), order.end(),
                    [&](size_t x, size_t y) { return row.weights[x] > row.weights[y]; });
  view.weighing_keys = order.size();
  for (size_t n = 0; n < heaviest_keys; ++n) {
    HeavyKey key{row.keys[order[n]], double(row.weights[order[n]]), {}, {}};
    for (int64_t d = 0; d < s.dk; ++d) key.k.push_back(double(c.k[size_t(s.k_at(b, h, key.j) + d)]));
    for (int64_t d = 0; d < s.dv; ++d) key.v.push_back(double(c.v[size_t(s.v_at(b, h, key.j) + d)]));
    view.heaviest.push_back(std::move(key));
  }
}

// The problem shown, c (its tensors q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv],
// allow [B,Tq,Tk], bias [B,H,Tq,Tk]) with the call's out [B,H,Tq,dv] on it, as the page shows it.
template <class T>
ProblemView problem_view(const CampaignOptions& options, const Call& call, Case<T> c) {
  c.empty_rows = options.policies.empty_rows;  // as the campaign ran it
  c.lse_empty = options.policies.lse_empty;
  const Shape& s = c.shape;
  const std::vector<T> out(call.out.begin(), call.out.end());  // the call's out in T, as the kernel wrote it
  ProblemView view;
  view.shape = s;
  const std::string described = describe(c);
  view.described = described.substr(0, described.find('\n'));
  std::vector<ExactRow> exact;  // [rows]
  view.slice = slice_shown(c, out, exact);
  view.in_full =
      s.Tq <= kFullLength && s.Tk <= kFullLength && c.q.size() + c.k.size() + c.v.size() + c.bias.size() <= size_t(kFullValues);
  if (view.in_full) {
    view.q = widened(c.q);
    view.k = widened(c.k);
    view.v = widened(c.v);
    view.bias = widened(c.bias);
    view.allow = c.allow;
  } else {
    view.spreads = spreads(c, out, view.slice.have_out);
    failing_row(c, exact[size_t(view.slice.i - view.slice.rows.front())], view);
  }
  view.key_lengths = c.key_lengths;
  return view;
}

}  // namespace

std::vector<FindingView> finding_views(const CampaignOptions& options, const CampaignResult& result) {
  std::vector<FindingView> views;
  if (!result.found) return views;
  for (const Finding& f : result.findings) {
    const Call call = call_shown(options, f);
    FindingView view{call.which, call.fault, std::nullopt};
    if (!call.text.empty())
      view.problem = visit_case_text(call.text, [&](auto c) { return problem_view(options, call, std::move(c)); });
    views.push_back(std::move(view));
  }
  return views;
}

}  // namespace attncheck
