// Large problems checked cheaply and honestly (docs/checking.md, "Large problems"): the oracle
// computes a sample of rows exactly, and every other row is screened against attncheck's plain
// implementation; a row the screen flags is computed exactly too. The screen only ever adds rows
// to the exact check, so it can never flag a correct kernel; the verdict is always the bound's.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "attncheck/compare.hpp"
#include "attncheck/contract.hpp"
#include "attncheck/oracle.hpp"

namespace attncheck {

// reference() computes every row of a problem with at most this many query-key pairs
// (B H Tq Tk), and otherwise a sample of about kSampledPairs pairs' worth of rows.
constexpr int64_t kAllRowsPairs = int64_t(1) << 20;
constexpr int64_t kSampledPairs = int64_t(1) << 18;

// Rows to compute exactly, [B*H*Tq] (row (b, h, i) at (b H + h) Tq + i): always the first and last
// query of every head; then, up to `extra` more, spread over the heads in turn: queries whose
// permitted keys end or number at a tile edge (t - 1, t, t + 1 for t = 16, 32, ..., 4096, then
// every multiple of 64), queries at query-tile edges, both sides of a jump in the permitted keys
// (padding, document boundaries), and random ones, seeded by the shape so that a problem always
// gets the same sample.
template <class T>
std::vector<uint8_t> sample_rows(const Problem<T>& problem, int64_t extra);

// The rows reference() computes when not told: all, or the sample above (nullopt-like: empty = all).
template <class T>
std::vector<uint8_t> default_rows(const Problem<T>& problem);

// The rows a reference computed, [B*H*Tq], 1 = exact: for a property that compares two references
// of related problems, so that the second computes the rows the first has.
std::vector<uint8_t> rows_computed(const ExactTensor& out);

// The screen: rows of `out` that were not computed exactly whose computed output is NaN or
// infinite where the plain one (attncheck's implementation, same precision) is finite or the
// reverse, or further from it than sqrt(u) max_j |v_jc| over the head's finite values. computed
// and plain [B,H,Tq,dv]; returns [B*H*Tq], 1 = compute exactly.
template <class T>
std::vector<uint8_t> screen(const Problem<T>& problem, const T* computed, const T* plain, const ExactTensor& out);

// Told how many rows of how many are done as add_rows_in_chunks goes: (0, total) before the first.
using RowProgress = std::function<void(int64_t done, int64_t total)>;

// add_rows (oracle.hpp) of the rows set in `rows`; with `progress`, in about twenty chunks (each of
// at least 2^16 query-key pairs, which the oracle still spreads over its threads), telling it after
// each: the same rows, the same values, for a report that shows it is working.
template <class T>
void add_rows_in_chunks(const Problem<T>& problem, const std::vector<uint8_t>& rows, Reference& ref, const RowProgress& progress);

// The one verdict (compare.hpp's judge) on `computed` against `ref`, every row or a sample: a
// sampled reference first judges its own rows, then gains the rows the screen flags (in chunks,
// stopping at the first wrong one), and before calling a kernel imprecise gains every row, since
// the precision gate's limit scales with the built-in's largest loss over all of them;
// `computing_every_row`, when given, follows those rows' progress (it can take minutes).
template <class T>
Verdict judge_rows(const Problem<T>& problem, const T* computed, const T* plain, Reference& ref,
                   const RowProgress& computing_every_row = {});

}  // namespace attncheck
