// The high-precision oracle: attention computed from the exact binary inputs, row by row with
// explicit loops, sharing no kernel with impl/ so that a bug in one cannot hide in the other. Its
// weights are double-double (oracles/src/double_double.hpp) and its log-sum-exp MPFR at 200 bits;
// every error of its own is charged to the bound it gives each output element (docs/error-bound.md).
// Rows run in parallel on every core (ATTNCHECK_THREADS to choose); each row is computed the
// same way whatever the number of threads, so results are identical for any.
#pragma once

#include <cstdint>
#include <vector>

#include "attncheck/contract.hpp"

namespace attncheck {

// One query row (b, h, i): its weights, log-sum-exp and output, with their bounds.
struct ExactRow {
  bool empty = false;                     // no key carries weight: the empty-row policy gave the row
  std::vector<int64_t> keys;              // [n] the keys that carry weight: permitted, score not -inf (mean: every key)
  std::vector<long double> weights;       // [n] p_ij to long double, within 2^-62 relative (0 where it underflows double)
  long double sink_weight = 0;            // exp(sink_h - lse): the weight the head's sink takes (0 without one)
  long double lse = 0;                    // log sum_j exp(s_ij)
  std::vector<long double> out;           // [dv] sum_j p_ij v_jc, to long double (2^-64 relative)
  std::vector<double> bound;              // [dv] the bound on |computed - exact| of any correct T implementation
  std::vector<double> natural;            // [dv] the precision gate's unit (docs/error-bound.md)
  double lse_bound = 0, lse_natural = 0;  // the same for lse
  // What the backward's bound starts from (backward.hpp), for rows with finite weights: the forward
  // bound's score error E_j and weight error A_j, S_j, what flushing can move s_j (F_j without the
  // 2 tiny of its own underflow) and the gap m - s_j (docs/error-bound.md), and with a soft-cap the
  // derivative of s_j in scale q . k_j, 1 - tanh^2, to long double.
  std::vector<double> score_error, weight_error, score_size, score_flush, gap;  // [n]
  std::vector<long double> cap_slope;                                           // [n], or empty without a soft-cap
};

// Row (b, h, i) of `problem`: Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], bias [B,H,Tq,Tk] in.
// With input_score_error [Tk], the kernel computes from inputs near q and k, not q and k (the
// layer's projections, layer_oracle.hpp): its score of key j may err by input_score_error[j] more,
// which the bound charges as a score error (docs/error-bound.md, "The layer").
template <class T>
ExactRow exact_row(const Problem<T>& problem, int64_t b, int64_t h, int64_t i, const double* input_score_error = nullptr);

// Every row of `problem`, [B*H*Tq] at (b H + h) Tq + i: what the backward's reference reads.
template <class T>
std::vector<ExactRow> exact_rows(const Problem<T>& problem);

// One named result tensor of the reference: for each element the exact value, the bound on
// |computed - exact| of any correct implementation, and the precision gate's unit.
struct ExactTensor {
  const char* name = "";
  std::vector<int64_t> dims;  // the tensor's shape, e.g. {B,H,Tq,dv}
  // Whether an infinite exact value must be matched exactly. In out an infinity comes from an
  // infinite input, and NaN may stand for it (an underflowed weight times inf); in lse -inf is an
  // empty row's value under the zero policy, and NaN there is wrong.
  bool infinities_exact = false;
  // The format the computed tensor is in: the problem's for out; for lse float (double in f64).
  Format format = Format::f32;
  std::vector<long double> exact;
  std::vector<double> bound;
  std::vector<double> natural;
  // Which query rows were computed, [B*H*Tq] (row (b, h, i) at (b H + h) Tq + i), each row_size
  // elements long (dv in out, 1 in lse); empty = all. The others hold exact NaN and bound +inf,
  // and the comparator skips them: a sampled check (rows.hpp) screens them another way.
  std::vector<uint8_t> exact_rows;
  int64_t row_size = 1;
  bool row_is_exact(int64_t row) const { return exact_rows.empty() || exact_rows[size_t(row)]; }
};

// The whole problem's results, each a named tensor: out [B,H,Tq,dv] and lse [B,H,Tq] (the
// log-sum-exp of each row's permitted scores: -inf for an empty row, NaN under the nan policy).
struct Reference {
  ExactTensor out, lse;
};

// The rows set in `rows` [B*H*Tq]; when not given, every row of a problem of at most
// kAllRowsPairs query-key pairs and a sample of a larger one (rows.hpp).
template <class T>
Reference reference(const Problem<T>& problem, const std::vector<uint8_t>* rows = nullptr);

// Computes the rows set in `rows` into `ref` (a reference of the same problem) and marks them exact.
template <class T>
void add_rows(const Problem<T>& problem, const std::vector<uint8_t>& rows, Reference& ref);

}  // namespace attncheck
