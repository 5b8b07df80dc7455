// Attention problems drawn from a stream of choices: the one generator behind the property suite
// (choices from RapidCheck, so they shrink), the sweeps and campaigns (a seeded PRNG) and the
// fuzzers (the fuzzer's bytes). Input mix: standard normal, wide (scaled logits past +-88 and
// +-1e4), tiny and subnormal, exact ties, arbitrary bit patterns; masks of every density, empty
// rows, key padding, both causal alignments, Tq != Tk, a bias with extreme and -inf entries;
// beyond ABI v1, sliding windows and soft-caps.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attncheck/contract.hpp"
#include "attncheck/domain.hpp"
#include "attncheck/plugin.h"

namespace attncheck {

// Where the choices come from. below(n) returns a value in [0, n); smaller is simpler, so that a
// shrinking source leads to small shapes and plain values.
struct Chooser {
  virtual ~Chooser() = default;
  virtual uint64_t below(uint64_t n) = 0;
};

// Choices from std::mt19937_64 with a fixed seed (its output is specified by the standard).
struct SeededChooser : Chooser {
  explicit SeededChooser(uint64_t seed) : rng(seed) {}
  uint64_t below(uint64_t n) override { return n <= 1 ? 0 : rng() % n; }
  std::mt19937_64 rng;
};

// A standard normal value: Box-Muller on the chooser's uniform draws (std::normal_distribution
// differs between standard libraries, so a fixed seed would not give the same values everywhere).
double standard_normal(Chooser& choose);

// The largest shapes drawn.
struct CaseLimits {
  int64_t max_batch = 3, max_heads = 3, max_len = 24, max_width = 24;
  int64_t min_heads = 1, min_len = 1;  // Tq and Tk at least min_len
  bool abi_only = false;               // through a plugin: the zero empty-row policy only
  // What the cases may use, in ABI v2's capability bits (plugin.h): an allow mask, causal masks, key
  // lengths, a window, a soft-cap, a bias; all of them unless a plugin's capabilities say less.
  uint32_t capabilities = ~0u;
  // And within what the kernel takes of them (domain.hpp): every case drawn is inside it by
  // construction, the shapes above clamped to its limits.
  Domain domain{};
  // The size ladder: when ladder_len > 0, one case in three is large, Tq and Tk from kLengthLadder
  // up to ladder_len (or between two rungs), dk and dv from kWidthLadder up to ladder_width.
  // Off unless the runner asks (the campaign does); a property whose check costs more than a few
  // passes over its case sets small_only.
  int64_t ladder_len = 0, ladder_width = 0;
  bool small_only = false;
};

// Tile edges: where tiled kernels change what they do (a last partial tile, a second tile, a
// split path). Lengths are drawn at a rung or between two, widths at a rung; a large case does at
// most kLargeCaseWork multiply-adds (B H Tq Tk (dk + dv)), Tq and then Tk stepping down the ladder
// until it fits.
inline constexpr int64_t kLengthLadder[] = {1,   2,   3,    7,    8,    9,    15,   16,   17,   31,  32,
                                            33,  63,  64,   65,   127,  128,  129,  255,  256,  257, 511,
                                            512, 513, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096};
inline constexpr int64_t kWidthLadder[] = {1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 40, 63, 64, 65, 80, 96, 112, 128, 160, 192, 256};
inline constexpr int64_t kLargeCaseWork = int64_t(1) << 26;

// An owned problem: its buffers, and the Problem view of them.
template <class T>
struct Case {
  Shape shape;
  std::vector<T> q, k, v,
      bias;  // [B,H,Tq,dk], [B,H_kv,Tk,dk] (paged [NB,H_kv,BS,dk]), [B,H_kv,Tk,dv] (or [NB,H_kv,BS,dv]), [B,H,Tq,Tk] or empty
  std::vector<uint8_t> allow;                       // [B,Tq,Tk] or empty
  std::vector<int32_t> key_lengths;                 // [B] or empty
  std::vector<float> sinks;                         // [H] or empty: one logit per query head (contract.hpp)
  std::vector<int32_t> block_table;                 // [B,BPS] or empty: with a paged shape k and v are pools (contract.hpp)
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;  // [B+1] each or empty: with a varlen shape the sequences are packed
  Causal causal = Causal::none;
  int64_t window_left = -1, window_right = -1;  // a sliding window (Masks); -1 = unbounded
  double scale = 0;
  double softcap = 0;    // 0 = none
  double dropout_p = 0;  // 0 = none; never drawn: the dropout properties set it
  uint64_t dropout_seed = 0;
  EmptyRows empty_rows = EmptyRows::zero;  // the empty-row policies the case is checked under (policies.hpp)
  LseEmpty lse_empty = LseEmpty::ninf;
  Format format = Precision<T>::format;  // T's, or f16 or bf16 holding exactly q, k, v and bias (Problem)
  std::string mix;                       // what was drawn, for RC_CLASSIFY and reports
  Problem<T> problem() const;
  // Whether the masks let query i of batch b see key j, the bias aside (the contract's permits).
  bool permits(int64_t b, int64_t i, int64_t j) const { return attncheck::permits(problem().masks, shape, b, i, j); }
};

template <class T>
Case<T> draw_case(Chooser& choose, const CaseLimits& limits = {});

// One head's sink: 0 first (the simplest, a weight of exp(-m)), then -inf, +30, -30, small and
// fractional values, a multiple of 1/64, and one far below any score. `check` is any chooser with
// below(n) (a Chooser, a property's Checker).
template <class Choose>
float draw_sink(Choose& check) {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  switch (check.below(9)) {
    case 0:
      return 0;
    case 1:
      return kNone;
    case 2:
      return 30;
    case 3:
      return -30;
    case 4:
      return 1.5f;
    case 5:
      return -2.25f;
    case 6:
      return 8;
    case 7:
      return float(int64_t(check.below(800)) - 400) / 64;  // a multiple of 1/64 in [-6.25, 6.25)
    default:
      return -1e4f;
  }
}

// `limits` with its batch and heads clamped to its domain's limits (a property's least heads or length
// too; Tq and Tk through longest).
CaseLimits clamped_to_domain(CaseLimits limits);
// The longest Tq and Tk a case within `limits` may have up to `most`: each its domain's own limit
// (both the smaller one in a square domain).
struct Lengths {
  int64_t q, k;
};
Lengths longest(const CaseLimits& limits, int64_t most);

// The head widths a case may have up to `most`: those `limits` take, or the smallest they take when
// none is that narrow (head widths 64 and 128 only: 64).
std::vector<int64_t> drawable_widths(const Limits& limits, int64_t most);

// The format of a case: for float, one of f32, f16 and bf16 that the capabilities claim (choice 0
// the first, so that float32 is the simplest; no choice when only one is claimed, so that a kernel
// of one format draws what it always drew); f64 for double.
template <class T>
Format draw_format(Chooser& choose, uint32_t capabilities);

// c with dv = Tk and every head's V [Tk,Tk] the identity, so that the output is the weights:
// out[b,h,i,j] = sum_k w_ik [k == j] = w_ij exactly (the other terms are zeros).
template <class T>
Case<T> with_identity_values(Case<T> c) {
  const Shape& s = c.shape;
  c.shape.dv = s.Tk;
  c.v.assign(size_t(c.shape.v_size()), T(0));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t j = 0; j < s.Tk; ++j) c.v[size_t(c.shape.v_at(b, h, j) + j)] = 1;
  return c;
}

// The case that showed a correct kernel under denormals-are-zero flagged (issue 9): one query, two
// keys, B H Tq dk dv 1; q the largest float subnormal, k = [1e34, 0], v = [1, 0]. Exact 0.5000294;
// a kernel that reads q as 0 gives 0.5, within the bound and the precision gate.
Case<float> flushed_subnormal_case();

// c's inputs made finite, for --masked-inputs finite (policies.hpp): every NaN and inf of q, k, v
// and bias becomes a finite extreme of its sign (max_finite / 2 of the format; NaN becomes +), so
// that overflowing scores are still drawn; a -inf bias, which forbids, stays. Every one: a property
// may yet change the masks of a drawn case. The NaN and inf rules of permitted keys are checked on
// the fixed cases, built where every query sees the poisoned key.
template <class T>
Case<T> with_finite_inputs(Case<T> c);

// c with every input no query may see changed: the k and v of a key that no query of its KV head
// may see, the q of a query that may see no key, and a bias entry where the masks forbid. `zero`
// sets them to 0 (whether a finding needs what was put there); `finite` makes only their NaN and
// inf finite extremes, as with_finite_inputs does (whether --masked-inputs finite accepts it).
enum class Unseen { zero, finite };
template <class T>
Case<T> with_unseen_inputs(Case<T> c, Unseen how);

// What c holds that a policy relaxes, as words: "empty row" (a query no key is permitted to),
// "unseen NaN or inf" (a NaN or inf in an input no query may see); "" for neither. Failed runs of
// one property whose cases differ in these may be different bugs (a convention, and one beside it).
template <class T>
std::string policy_traits(const Case<T>& c);

// A paged or varlen case's dense twin (contract.hpp's dense_of): a paged one's k [B,H_kv,Tk,dk] and v
// [B,H_kv,Tk,dv] gathered through its block table, no table; a varlen one's packed tensors as one
// batch under its sequences' allow mask [1,Tq,Tk], no other mask; c itself when dense.
template <class T>
Case<T> dense_twin(const Case<T>& c);

// c laid out as a serving engine's paged cache holds it (contract.hpp, ATTNCHECK_CAP_PAGED_KV): blocks
// of 1, 2, 16 keys or a size not a power of two, each sequence's blocks at shuffled places in a pool
// with unused blocks, its table's entries past its last block naming any block (repeated ones), and
// every slot no key of a sequence fills holding `poison` (a key past a sequence's length is such a
// slot: what its dense twin holds there is masked). `check` is any chooser with below(n).
template <class T, class Choose>
Case<T> with_paging(Choose& check, const Case<T>& c, T poison) {
  const Shape& s = c.shape;
  const int64_t BS = std::array<int64_t, 6>{1, 2, 16, 3, 5, 7}[check.below(6)];
  Case<T> paged = c;
  Shape& t = paged.shape;
  t.BS = BS;
  t.BPS = (s.Tk + BS - 1) / BS + int64_t(check.below(2));  // a spare entry a sequence does not need
  std::vector<int64_t> needed(size_t(s.B));                // each sequence's blocks of keys
  for (int64_t b = 0; b < s.B; ++b) needed[size_t(b)] = ((c.key_lengths.empty() ? s.Tk : c.key_lengths[size_t(b)]) + BS - 1) / BS;
  t.NB = std::max<int64_t>(1, std::accumulate(needed.begin(), needed.end(), int64_t(0)) + int64_t(check.below(3)));
  std::vector<int32_t> place(size_t(t.NB));  // the pool's blocks in a shuffled order, taken in turn
  std::iota(place.begin(), place.end(), 0);
  for (size_t n = place.size(); n > 1; --n) std::swap(place[n - 1], place[size_t(check.below(n))]);
  paged.block_table.resize(size_t(s.B * t.BPS));
  size_t next = 0;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t e = 0; e < t.BPS; ++e)
      paged.block_table[size_t(b * t.BPS + e)] = e < needed[size_t(b)] ? place[next++] : int32_t(check.below(uint64_t(t.NB)));
  paged.k.assign(size_t(t.k_size()), poison);
  paged.v.assign(size_t(t.v_size()), poison);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; h += s.H / s.kv_heads())
      for (int64_t j = 0; j < needed[size_t(b)] * BS && j < s.Tk; ++j) {
        if (!c.key_lengths.empty() && j >= c.key_lengths[size_t(b)]) continue;  // past its length: poison
        const int64_t row = kv_row(t, paged.block_table.data(), b, h, j);
        std::copy_n(c.k.begin() + s.k_at(b, h, j), s.dk, paged.k.begin() + row * s.dk);
        std::copy_n(c.v.begin() + s.v_at(b, h, j), s.dv, paged.v.begin() + row * s.dv);
      }
  return paged;
}

// Where a sequence's rows start in a case: its batch and its first query and key rows.
struct RowsAt {
  int64_t b, first_q, first_k;
};
// Copies Tq query rows and Tk key rows of every head from `from` at `at` to `to` at `into`, each
// case's q [B,H,Tq,dk], k [B,H_kv,Tk,dk] and v [B,H_kv,Tk,dv] at its own shape (packed or not).
template <class T>
void copy_sequence(const Case<T>& from, RowsAt at, Case<T>& to, RowsAt into, int64_t Tq, int64_t Tk) {
  const Shape &s = from.shape, &t = to.shape;
  for (int64_t h = 0; h < s.H; ++h) {
    std::copy_n(from.q.begin() + s.q_at(at.b, h, at.first_q), Tq * s.dk, to.q.begin() + t.q_at(into.b, h, into.first_q));
    std::copy_n(from.k.begin() + s.k_at(at.b, h, at.first_k), Tk * s.dk, to.k.begin() + t.k_at(into.b, h, into.first_k));
    std::copy_n(from.v.begin() + s.v_at(at.b, h, at.first_k), Tk * s.dv, to.v.begin() + t.v_at(into.b, h, into.first_k));
  }
}

// The B sequences of c packed as a varlen call takes them (contract.hpp, ATTNCHECK_CAP_VARLEN): each
// sequence's first Tq_b queries and Tk_b keys, each length 0, its whole, or any between (a sequence
// empty of queries or keys among them; at least one query and one key in all), rows laid end to end
// in q [H,sum Tq_b,dk], k [H_kv,sum Tk_b,dk] and v. c's causal mode and window apply within each
// sequence (kv-end becomes lower-right: a sequence ends at its own last key); its allow mask, key
// lengths and bias, which a varlen call does not take, are dropped. `check` is any chooser with below(n).
template <class T, class Choose>
Case<T> with_varlen(Choose& check, const Case<T>& c) {
  const Shape& s = c.shape;
  auto length = [&](int64_t most) {
    const uint64_t pick = check.below(4);
    return pick == 0 ? 0 : pick == 1 ? most : int64_t(check.below(uint64_t(most + 1)));
  };
  Case<T> packed = c;
  packed.allow.clear(), packed.key_lengths.clear(), packed.bias.clear(), packed.block_table.clear();
  if (packed.causal == Causal::kv_end) packed.causal = Causal::lower_right;
  packed.cu_seqlens_q = packed.cu_seqlens_k = {0};
  for (int64_t b = 0; b < s.B; ++b) {
    packed.cu_seqlens_q.push_back(int32_t(packed.cu_seqlens_q.back() + length(s.Tq)));
    packed.cu_seqlens_k.push_back(int32_t(packed.cu_seqlens_k.back() + length(s.Tk)));
  }
  for (auto* cu : {&packed.cu_seqlens_q, &packed.cu_seqlens_k})  // none at all: the first sequence whole
    if (cu->back() == 0)
      for (size_t b = 1; b < cu->size(); ++b) (*cu)[b] = int32_t(cu == &packed.cu_seqlens_q ? s.Tq : s.Tk);
  Shape& t = packed.shape;
  t.varlen = true, t.Tq = packed.cu_seqlens_q.back(), t.Tk = packed.cu_seqlens_k.back();
  packed.q.assign(size_t(t.q_size()), T(0));
  packed.k.assign(size_t(t.k_size()), T(0));
  packed.v.assign(size_t(t.v_size()), T(0));
  for (int64_t b = 0; b < s.B; ++b) {
    const Sequence at = sequence(packed.problem(), b);
    copy_sequence(c, {b, 0, 0}, packed, {0, at.first_q, at.first_k}, at.Tq, at.Tk);
  }
  return packed;
}

// Head h of batch b alone, as a B 1, H 1 case with that batch's masks.
template <class T>
Case<T> slice(const Case<T>& c, int64_t b, int64_t h);

// Row (b, h, i)'s inputs: its q and the k, v (and bias) of the keys it may see, the first 16 of
// each; what a failure report adds when the tensors are too large for describe() to print.
template <class T>
std::string describe_row(const Case<T>& c, int64_t b, int64_t h, int64_t i);

// The causal mode's name as case texts, reports and tests write it: none, upper-left, lower-right, kv-end.
inline const char* causal_name(Causal causal) { return kCausalNames[int(causal)]; }

// A value for a failure message, to 9 significant digits (std::to_string prints 1e-30 as 0.000000).
std::string show(double x);

// A case as a person reads it: shapes, scale, causal mode and policy, each batch's mask as a grid
// (# may attend, . may not), and the tensors' values when they are small enough to read.
template <class T>
std::string describe(const Case<T>& c);

}  // namespace attncheck
