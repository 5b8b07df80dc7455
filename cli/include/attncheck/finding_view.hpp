// What the HTML report (html_report.hpp) shows of a finding, computed: the campaign keeps no output,
// so the property runs once more on the finding and the call the oracle calls wrong is shown; on it,
// the oracle's exact rows of one (b, h) slice, each output element's error/bound, the permitted keys
// and the exact weights. Plain data, values widened to double (exact for every format): the report
// renders it and computes nothing, so that its layout changes never touch the kernel or the oracle.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attncheck/campaign.hpp"

namespace attncheck {

// A heatmap shows at most this many queries: a window around the failing one beyond it.
constexpr int64_t kShownRows = 32;

// One tensor at a glance (a large case's): its values, least and largest finite (low > high when
// none is), how many are NaN or infinite.
struct Spread {
  std::string name, shape;  // "q", "[B,H,Tq,dk]" as numbers: "[1,2,300,64]"
  size_t values = 0;
  double low = INFINITY, high = -INFINITY;
  int64_t nans = 0, infinities = 0;
};

// A key that weighs in the failing row, its k row [dk] and v row [dv] (of the query head's KV head).
struct HeavyKey {
  int64_t j = 0;
  double weight = 0;
  std::vector<double> k, v;
};

// The (b, h) slice shown and its queries, per query shown (rows: at most kShownRows of Tq) the
// kernel's out, the oracle's, the bound and their error/bound per column of dv, and per key of Tk
// whether the masks permit it and its exact weight.
struct SliceView {
  // The slice and its failing query: of the first element outside the bound, else of the least accurate.
  int64_t b = 0, h = 0, i = 0;
  std::string where;                            // "batch b, head h"
  bool have_out = false;                        // an out to compare: one was kept, and the call had no dropout
  bool all_within = true;                       // no element outside the bound (with have_out: the kernel is right on this case)
  std::vector<int64_t> rows;                    // the queries shown, consecutive
  std::vector<std::vector<double>> out;         // [rows][dv] the kernel's, when have_out
  std::vector<std::vector<long double>> exact;  // [rows][dv] the oracle's
  std::vector<std::vector<double>> bound;       // [rows][dv]
  // [rows][dv] error/bound, when have_out: within the bound 0 to 1, outside it above 1, +inf for a
  // wrong special value, NaN where the bound is infinite (T's range cannot hold the computation).
  std::vector<std::vector<double>> ratio;
  std::vector<std::vector<uint8_t>> permitted;  // [rows][Tk] 1 where the masks let the query see the key
  std::vector<std::vector<double>> weights;     // [rows][Tk] the exact weights, 0 where a key carries none
};

// The problem shown: the shape, describe()'s first line, the slice, and its tensors: a small one's
// in full (q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv], bias [B,H,Tq,Tk], allow [B,Tq,Tk]),
// a large one's as each tensor's spread and the failing row.
struct ProblemView {
  Shape shape;
  std::string described;
  SliceView slice;
  bool in_full = false;
  std::vector<double> q, k, v, bias;  // in_full: the tensors; bias empty without one (else all empty)
  std::vector<uint8_t> allow;         // in_full: [B,Tq,Tk], or empty
  std::vector<Spread> spreads;        // !in_full: q, k, v, bias, out (computed)
  std::vector<double> failing_q;      // !in_full: q[b,h,i] [dk]
  size_t weighing_keys = 0;           // !in_full: the keys that carry weight in the failing row
  std::vector<HeavyKey> heaviest;     // !in_full: at most 8 of them, heaviest first
  std::vector<int32_t> key_lengths;   // [B], or empty
};

// A finding as the report shows it: the call shown (`which` says where it came from), why it has
// no output (`fault`), and its problem; none when the property ran the kernel on no case.
struct FindingView {
  std::string which, fault;
  std::optional<ProblemView> problem;
};

// The view of each of `result`'s findings, in order. Runs the implementation of `options` once more
// on each (not after a hang), and the oracle on the rows shown. Throws what reading a case text
// throws (std::runtime_error); a kernel that cannot be run again is said in the view's fault.
std::vector<FindingView> finding_views(const CampaignOptions& options, const CampaignResult& result);

}  // namespace attncheck
