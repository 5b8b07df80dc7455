// The high-precision oracle: attention computed from the exact binary inputs in MPFR at 200 bits,
// row by row with explicit loops, sharing no kernel with impl/ so that a bug in one cannot hide in
// the other. It also gives each output element its error bound (docs/error-bound.md).
#pragma once

#include <boost/multiprecision/mpfr.hpp>
#include <cstdint>
#include <vector>

#include "attncheck/contract.hpp"

namespace attncheck {

// 60 decimal digits = 200 bits, far above float's 24 and double's 53; no expression templates.
using Exact = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<60>,
                                            boost::multiprecision::et_off>;

// One query row (b, h, i), exactly: its scores, row maximum, weights, log-sum-exp and output.
struct ExactRow {
  std::vector<int64_t> keys;     // [n] the keys that carry weight: permitted, score not -inf
  std::vector<Exact> scores;     // [n] s_ij = scale * q_i . k_j + bias_ij
  Exact max;                     // m_i over those keys; -inf for an empty row
  std::vector<Exact> weights;    // [n] p_ij
  Exact lse;                     // log sum_j exp(s_ij)
  std::vector<long double> out;  // [dv] sum_j p_ij v_jc, rounded to long double (2^-64 relative)
  std::vector<double> bound;     // [dv] the bound on |computed - exact| of any correct T implementation
  std::vector<double> natural;   // [dv] the precision gate's unit (docs/error-bound.md)
  double lse_bound = 0, lse_natural = 0;  // the same for lse
};

// Row (b, h, i) of `problem`: Q [B,H,Tq,dk], K [B,H_kv,Tk,dk], V [B,H_kv,Tk,dv], bias [B,H,Tq,Tk] in.
template <class T>
ExactRow exact_row(const Problem<T>& problem, int64_t b, int64_t h, int64_t i);

// One named result tensor of the reference: for each element the exact value, the bound on
// |computed - exact| of any correct implementation, and the precision gate's unit.
struct ExactTensor {
  const char* name = "";
  std::vector<int64_t> dims;  // the tensor's shape, e.g. {B,H,Tq,dv}
  // Whether an infinite exact value must be matched exactly. In out an infinity comes from an
  // infinite input, and NaN may stand for it (an underflowed weight times inf); in lse -inf is an
  // empty row's value under the zero policy, and NaN there is wrong.
  bool infinities_exact = false;
  std::vector<long double> exact;
  std::vector<double> bound;
  std::vector<double> natural;
};

// The whole problem's results, each a named tensor: out [B,H,Tq,dv] and lse [B,H,Tq] (the
// log-sum-exp of each row's permitted scores: -inf for an empty row, NaN under the nan policy).
struct Reference {
  ExactTensor out, lse;
};
template <class T>
Reference reference(const Problem<T>& problem);

}  // namespace attncheck
