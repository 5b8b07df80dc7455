// Softmax: the stable form used by attention, and the naive form kept as the overflow example.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <limits>

#include "attncheck/contract.hpp"

namespace attncheck {

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Which way the softmax runs: along each row (attention's scores [Tq,Tk]), or down each column
// (Understanding Deep Learning's D x N layout, one column per example).
enum class Axis { rows, columns };

// Stable softmax of the n entries x[0], x[stride], ..., in place. Entries equal to -inf are
// forbidden and get weight exactly 0; the maximum is taken over the others. A NaN or +inf entry
// makes every weight NaN (there is no finite softmax of it). With no permitted entry the policy
// decides: zero gives weights 0, nan gives NaN. Returns the log-sum-exp (-inf or NaN for an
// empty line, by the same policy). A sink above -inf (contract.hpp) is one more entry of the
// denominator with no weight of its own written: a line with no permitted entry then has weights 0
// and log-sum-exp `sink`.
template <class T>
T softmax_stable(T* x, int64_t n, int64_t stride, EmptyRows empty, T sink = -std::numeric_limits<T>::infinity());

// Stable softmax of every row or column of x [rows, cols], in place.
template <class T>
void softmax_stable(Eigen::Ref<RowMatrix<T>> x, Axis axis, EmptyRows empty = EmptyRows::zero);

// exp(x) / sum exp(x) without subtracting the maximum: overflows once an entry passes
// ln(FLT_MAX) = 88.72 in float. Kept only as the documented example of why the stable form exists.
template <class T>
void softmax_naive(Eigen::Ref<RowMatrix<T>> x, Axis axis);

}  // namespace attncheck
