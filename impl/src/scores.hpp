// Pass 1 of attention, written once for the forward (attention.cpp) and the backward
// (attention_backward.cpp), which recomputes the scores the forward used.
#pragma once

#include <Eigen/Core>
#include <cstdint>

#include "attncheck/contract.hpp"
#include "attncheck/softmax.hpp"

namespace attncheck {

// Which key each query may see by the masks, the bias aside: [Tq,Tk], shared by a batch's heads.
using Permission = Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// permitted [Tq,Tk] for batch b: allow AND causal AND key length AND window.
template <class T>
void permission(const Problem<T>& problem, int64_t b, Permission& permitted);

// w [Tq,Tk] for head h of batch b: s_ij = cap(scale q_i . k_j) + bias_ij, and -inf where key j is
// forbidden (by `permitted`, or by a -inf bias whatever its key holds: inf + -inf would be NaN).
// With a soft-cap and tanh_t given, tanh(scale q_i . k_j / cap) [Tq,Tk] goes there too, for the
// soft-cap's derivative. The C library's tanh (within 2 ulps), not Eigen's faster approximation.
template <class T>
void masked_scores(const Problem<T>& problem, int64_t b, int64_t h, const Permission& permitted, RowMatrix<T>& w,
                   RowMatrix<T>* tanh_t = nullptr);

}  // namespace attncheck
