#include "attncheck/rows.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "attncheck/precision.hpp"

namespace attncheck {

template <class T>
std::vector<uint8_t> sample_rows(const Problem<T>& p, int64_t extra) {
  // masks [B,Tq,Tk] in; rows [B*H*Tq] out.
  const Shape& s = p.shape;
  std::vector<uint8_t> rows(size_t(s.B * s.H * s.Tq), 0);
  // Per (b, i): how many keys the masks permit, and the last one (-1 for none).
  std::vector<int64_t> count(size_t(s.B * s.Tq), 0), last(size_t(s.B * s.Tq), -1);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < s.Tq; ++i)
      for (int64_t j = 0; j < s.Tk; ++j)
        if (permits(p.masks, s, b, i, j)) {
          ++count[size_t(s.query_row(b, i))];
          last[size_t(s.query_row(b, i))] = j;
        }
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i : {int64_t(0), s.Tq - 1}) rows[size_t(s.lse_at(b, h, i))] = 1;

  // Candidate queries (b, i), best first; candidate number n goes to head n mod H.
  std::vector<int64_t> candidates;  // b Tq + i
  auto edges = [&](bool powers) {
    for (int64_t t = powers ? 16 : 64; t <= std::max(s.Tq, s.Tk) + 1; t += powers ? t : 64) {
      if (!powers && (t & (t - 1)) == 0) continue;  // done with the powers
      for (int64_t b = 0; b < s.B; ++b)
        for (int64_t edge : {t - 1, t, t + 1}) {
          for (int64_t i = 0; i < s.Tq; ++i) {  // the first query whose keys number or end there
            const int64_t at = s.query_row(b, i);
            if (count[size_t(at)] == edge || last[size_t(at)] + 1 == edge) {
              candidates.push_back(at);
              break;
            }
          }
          if (edge < s.Tq && edge >= 0) candidates.push_back(s.query_row(b, edge));  // a query-tile edge
        }
    }
  };
  edges(true);
  edges(false);
  for (int64_t b = 0; b < s.B; ++b)  // both sides of a jump in the permitted keys
    for (int64_t i = 1; i < s.Tq; ++i) {
      const int64_t at = s.query_row(b, i);
      const int64_t grew = count[size_t(at)] - count[size_t(at - 1)], moved = last[size_t(at)] - last[size_t(at - 1)];
      if (grew < 0 || grew > 1 || moved < 0 || moved > 1) {
        candidates.push_back(at - 1);
        candidates.push_back(at);
      }
    }
  extra = std::min(extra, s.B * s.H * s.Tq);  // no more rows than there are
  std::mt19937_64 rng(uint64_t(((s.B * 31 + s.H) * 131 + s.Tq) * 8191 + s.Tk));
  for (int64_t n = 0; n < extra; ++n) candidates.push_back(int64_t(rng() % uint64_t(s.B * s.Tq)));

  int64_t taken = 0;
  for (size_t n = 0; n < candidates.size() && taken < extra; ++n) {
    const int64_t b = candidates[n] / s.Tq, i = candidates[n] % s.Tq, h = int64_t(n) % s.H;
    uint8_t& row = rows[size_t(s.lse_at(b, h, i))];
    taken += row == 0;
    row = 1;
  }
  return rows;
}

template <class T>
std::vector<uint8_t> default_rows(const Problem<T>& p) {
  const Shape& s = p.shape;
  if (s.B * s.H * s.Tq * s.Tk <= kAllRowsPairs) return {};
  return sample_rows(p, std::max<int64_t>(16, kSampledPairs / s.Tk));
}

std::vector<uint8_t> rows_computed(const ExactTensor& out) {
  return out.exact_rows.empty() ? std::vector<uint8_t>(out.exact.size() / size_t(out.row_size), 1) : out.exact_rows;
}

template <class T>
std::vector<uint8_t> screen(const Problem<T>& p, const T* computed, const T* plain, const ExactTensor& out) {
  // v [B,H_kv,Tk,dv], computed and plain [B,H,Tq,dv] in; rows [B*H*Tq] out.
  const Shape& s = p.shape;
  std::vector<uint8_t> flagged(size_t(s.B * s.H * s.Tq), 0);
  if (out.exact_rows.empty()) return flagged;
  const double tolerance = std::sqrt(Precision<T>::u);
  std::vector<double> scale(size_t(s.dv));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      if (h == 0 || s.kv_head(h) != s.kv_head(h - 1)) {  // max_j |v_jc| over the head's finite values
        std::fill(scale.begin(), scale.end(), 0.0);
        for (int64_t j = 0; j < s.Tk; ++j)
          for (int64_t c = 0; c < s.dv; ++c) {
            const double v = std::fabs(double(p.v[s.v_at(b, h, j) + c]));
            if (std::isfinite(v)) scale[size_t(c)] = std::max(scale[size_t(c)], v);
          }
      }
      for (int64_t i = 0; i < s.Tq; ++i) {
        const int64_t row = s.lse_at(b, h, i);
        if (out.exact_rows[size_t(row)]) continue;
        const T* x = computed + s.out_at(b, h, i);
        const T* y = plain + s.out_at(b, h, i);
        bool suspect = false;
        for (int64_t c = 0; c < s.dv && !suspect; ++c)
          suspect = std::isfinite(x[c]) != std::isfinite(y[c]) ||
                    (std::isfinite(x[c]) ? !(std::fabs(double(x[c]) - double(y[c])) <= tolerance * scale[size_t(c)])
                                         : !(x[c] == y[c] || (std::isnan(x[c]) && std::isnan(y[c]))));
        flagged[size_t(row)] = suspect;
      }
    }
  return flagged;
}

namespace {

// add_rows of the rows set in `rows`, chunk by chunk: the k-th chunk holds `size(k)` of them (the
// last fewer), and after each `after(rows added so far)` says whether to go on.
template <class T, class Size, class After>
void add_rows_by_chunk(const Problem<T>& p, const std::vector<uint8_t>& rows, Reference& ref, Size size, After after) {
  std::vector<uint8_t> chunk(rows.size(), 0);
  int64_t done = 0, in_chunk = 0, k = 0;
  for (size_t row = 0; row < rows.size(); ++row) {
    if (rows[row]) chunk[row] = 1, ++in_chunk;
    if (in_chunk == 0 || (in_chunk < size(k) && row + 1 < rows.size())) continue;
    add_rows(p, chunk, ref);
    done += in_chunk;
    if (!after(done)) return;
    std::fill(chunk.begin(), chunk.end(), 0);
    in_chunk = 0, ++k;
  }
}

}  // namespace

template <class T>
void add_rows_in_chunks(const Problem<T>& p, const std::vector<uint8_t>& rows, Reference& ref, const RowProgress& progress) {
  if (!progress) return add_rows(p, rows, ref);  // one call: the oracle's threads share all of it
  // Chunks of at least 2^16 query-key pairs, which add_rows spreads over threads (oracle.cpp).
  const int64_t total = std::count(rows.begin(), rows.end(), uint8_t(1));
  const int64_t per_chunk =
      std::max<int64_t>({1, total / 20, ((int64_t(1) << 16) + p.shape.Tk - 1) / std::max<int64_t>(1, p.shape.Tk)});
  progress(0, total);
  add_rows_by_chunk(
      p, rows, ref, [&](int64_t) { return per_chunk; },
      [&](int64_t done) {
        progress(done, total);
        return true;
      });
}

template <class T>
Verdict judge_rows(const Problem<T>& p, const T* computed, const T* plain, Reference& ref,
                   const RowProgress& computing_every_row) {
  Verdict verdict = judge(computed, plain, ref.out);
  if (ref.out.exact_rows.empty() || !verdict.bound.ok()) return verdict;
  // The screened rows in chunks that double from 256, each judged at once: a kernel wrong
  // everywhere fails after a few hundred rows, not after all of them.
  const std::vector<uint8_t> flagged = screen(p, computed, plain, ref.out);
  add_rows_by_chunk(
      p, flagged, ref, [](int64_t k) { return int64_t(256) << std::min<int64_t>(k, 40); },
      [&](int64_t) {
        verdict = judge(computed, plain, ref.out);
        return verdict.bound.ok();
      });
  if (!verdict.bound.ok()) return verdict;
  // The precision gate's limit scales with the built-in's largest loss over every row: before
  // calling a kernel imprecise, compute the rows the sample left out.
  if (!verdict.precision.ok()) {
    std::vector<uint8_t> rest(ref.out.exact_rows.size());
    for (size_t row = 0; row < rest.size(); ++row) rest[row] = !ref.out.exact_rows[row];
    add_rows_in_chunks(p, rest, ref, computing_every_row);
    verdict = judge(computed, plain, ref.out);
  }
  return verdict;
}

#define ATTNCHECK_ROWS(T)                                                                                           \
  template std::vector<uint8_t> sample_rows(const Problem<T>&, int64_t);                                            \
  template std::vector<uint8_t> default_rows(const Problem<T>&);                                                    \
  template std::vector<uint8_t> screen(const Problem<T>&, const T*, const T*, const ExactTensor&);                  \
  template void add_rows_in_chunks(const Problem<T>&, const std::vector<uint8_t>&, Reference&, const RowProgress&); \
  template Verdict judge_rows(const Problem<T>&, const T*, const T*, Reference&, const RowProgress&);
ATTNCHECK_ROWS(float)
ATTNCHECK_ROWS(double)

}  // namespace attncheck
