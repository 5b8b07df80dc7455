#include "attncheck/softmax.hpp"

#include <cmath>
#include <limits>

namespace attncheck {

template <class T>
T softmax_stable(T* x, int64_t n, int64_t stride, EmptyRows empty, T sink) {
  // x: n entries at stride `stride`.
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  auto at = [&](int64_t j) -> T& { return x[j * stride]; };

  // Pass 1: row max over permitted entries and the sink; NaN is sticky so that it cannot be skipped.
  T m = sink;
  for (int64_t j = 0; j < n; ++j)
    if (at(j) > m || std::isnan(at(j))) m = std::isnan(m) ? m : at(j);
  if (m == -inf) {  // no permitted entry and no sink
    const T fill = empty == EmptyRows::zero ? T(0) : nan;
    for (int64_t j = 0; j < n; ++j) at(j) = fill;
    return empty == EmptyRows::zero ? -inf : nan;
  }

  // Pass 2: exp and sum, from the sink's term (0 without one). Forbidden entries give exp(-inf - m) = 0
  // exactly; m = +inf or NaN gives NaN.
  T sum = std::exp(sink - m);
  for (int64_t j = 0; j < n; ++j) {
    at(j) = std::exp(at(j) - m);
    sum += at(j);
  }

  // Pass 3: normalize. sum >= 1 (the maximum, a key's or the sink's, contributes exp(0) = 1), so the division is safe.
  for (int64_t j = 0; j < n; ++j) at(j) /= sum;
  return m + std::log(sum);
}

template <class T>
void softmax_stable(Eigen::Ref<RowMatrix<T>> x, Axis axis, EmptyRows empty) {
  // x: [rows, cols], row-major with outer stride x.outerStride().
  const bool by_row = axis == Axis::rows;
  const int64_t lines = by_row ? x.rows() : x.cols();
  const int64_t n = by_row ? x.cols() : x.rows();
  const int64_t step = by_row ? 1 : x.outerStride();
  for (int64_t line = 0; line < lines; ++line) softmax_stable(by_row ? &x(line, 0) : &x(0, line), n, step, empty);
}

template <class T>
void softmax_naive(Eigen::Ref<RowMatrix<T>> x, Axis axis) {
  // x: [rows, cols].
  x = x.array().exp().matrix();
  if (axis == Axis::rows) {
    const Eigen::Matrix<T, Eigen::Dynamic, 1> sums = x.rowwise().sum();
    x.array().colwise() /= sums.array();
  } else {
    const Eigen::Matrix<T, 1, Eigen::Dynamic> sums = x.colwise().sum();
    x.array().rowwise() /= sums.array();
  }
}

template float softmax_stable(float*, int64_t, int64_t, EmptyRows, float);
template double softmax_stable(double*, int64_t, int64_t, EmptyRows, double);
template void softmax_stable<float>(Eigen::Ref<RowMatrix<float>>, Axis, EmptyRows);
template void softmax_stable<double>(Eigen::Ref<RowMatrix<double>>, Axis, EmptyRows);
template void softmax_naive<float>(Eigen::Ref<RowMatrix<float>>, Axis);
template void softmax_naive<double>(Eigen::Ref<RowMatrix<double>>, Axis);

}  // namespace attncheck
