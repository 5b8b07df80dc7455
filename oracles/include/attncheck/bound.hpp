// The rigorous error bound of one output row (derivation: docs/error-bound.md).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "attncheck/precision.hpp"

namespace attncheck {

// The arithmetic of the precision being checked, read off its Precision<T> trait.
struct Arithmetic {
  double u;           // unit roundoff: 2^-24 (float), 2^-53 (double)
  double tiny;        // smallest normal number: the most one flushed or subnormal result can lose
  double max_finite;  // largest finite number
  const char* label;  // how every report names it: "float32, u = 2^-24"
  // A 2-byte format around float arithmetic (f16, bf16: inputs, weights P and output stored in it),
  // else all 0: its unit roundoff, smallest normal, smallest subnormal and largest finite.
  double storage_u = 0, storage_tiny = 0, storage_subnormal = 0, storage_max = 0;
  template <class T>
  static Arithmetic of();
  // A problem's: its format's own, or float's with the 2-byte format's storage.
  static Arithmetic of(Format format);
};

// Relative error of an exp (or exp2) in units of u: 2 ulps, i.e. glibc's expf and exp, CUDA's
// expf and exp2f. A kernel with a worse exp is a precision-loss finding, not a correct kernel.
inline constexpr double kExpUnits = 4;

// Relative error of a tanh, in units of u: 2 ulps, as glibc's tanhf and tanh (the soft-cap).
inline constexpr double kTanhUnits = 4;

// The bound's own double arithmetic: a few hundred roundings at most per result, inflated away.
inline constexpr double kSelfInflation = 1 + 0x1p-30;

// gamma_k = k u / (1 - k u), the relative error of k roundings; no bound at all once k u reaches 1.
inline double gamma(double k, double u) { return k * u < 1 ? k * u / (1 - k * u) : std::numeric_limits<double>::infinity(); }

// A sum of n non-negative doubles, rounded to nearest, made an upper bound of the exact sum.
inline double inflate(double sum, int64_t n) { return sum * (1 + double(n + 2) * 0x1p-52); }

// What the bound needs of one query row, from the oracle's exact values. Index j runs over the
// n keys that carry weight.
struct RowFacts {
  int64_t dk = 1;
  double softcap = 0;           // the problem's soft-cap, 0 for none
  bool finite_row = true;       // the row's maximum and sum are finite; else its outputs are special values
  bool scores_in_range = true;  // no permitted key's score can overflow T (judged on finite terms)

  double max_abs = 0;               // |m_i|, rounded up
  double lse_abs = 0;               // |lse_i|, rounded up
  std::vector<double> score_size;   // [n] c sum_k |q_ik k_jk| + |bias_ij| over finite terms, rounded up
  std::vector<double> flush_error;  // [n] tiny max(1, c) (2 dk + sum_k |q_ik| + sum_k |k_jk|): what flushing can move a score
  std::vector<double> gap;          // [n] m_i - s_ij >= 0, rounded up
  std::vector<double> weight;       // [n] p_ij, within 4 ulps (0 where it underflows double)
  std::vector<double> log_weight;   // [n] log p_ij, within a few ulps
  // The oracle's own errors (docs/error-bound.md, "The oracle's own error"): of each score, its
  // weight's exp and the score's double-double arithmetic folded in, and the relative error its
  // normalizer shares with every weight.
  std::vector<double> oracle_score_error;  // [n]
  double oracle_weight_error = 0;
  double oracle_output_error = 0;  // the output's own arithmetic, relative to sum_j p_j |v_jc|
  // Dropout's rate, 0 for none: every kept term is p_j / (1 - p) (a dropped key's |v_jc| given as 0).
  double dropout_p = 0;
};

// Roundings a kept weight's dropout rescale can take in the kernel's precision: p's own, 1 - p's
// (amplified p / (1 - p) times by p's), the reciprocal or division, the product with the weight, and
// one to spare (docs/error-bound.md, "Dropout").
inline double dropout_roundings(double p) { return 4 + p / (1 - p); }

// The oracle's inner products in double-double (Ogita, Rump and Oishi's Dot2): after n finite
// terms whose |x y| sum to `size`, |computed - exact| <= gamma_2n(2^-53)^2 size + n 2^-1074.
inline double dot2_error(int64_t n, double size) {
  const double gamma_2n = 2 * double(n) * 0x1p-53 / (1 - 2 * double(n) * 0x1p-53);
  return gamma_2n * gamma_2n * size + double(n) * 0x1p-1074;
}

// The same two numbers for the row's log-sum-exp.
struct LseBound {
  double bound = 0, natural = 0;
};

// bound[c] and natural[c] for c < dv, from the row's facts and |v_jc| of its keys, v_abs [n,dv]
// (0 for a non-finite v_jc), and the log-sum-exp's. A bound is +inf where T's range cannot hold
// the computation (overflow is outside the model).
// When given, score_error and weight_error [n] receive E_j and A_j (the score's and the weight's
// error bounds, docs/error-bound.md steps 1 and 5): the backward's bound starts from them.
LseBound bound_row(const RowFacts& facts, const Arithmetic& arith, const std::vector<double>& v_abs, int64_t dv, double* bound,
                   double* natural, std::vector<double>* score_error = nullptr, std::vector<double>* weight_error = nullptr);

}  // namespace attncheck
