// The rules of the native reductions, which the CPU accumulators (cpu/accumulators.h) fold with
// and the generated GPU kernels write as text (cuda/codegen/emit_reduce.cpp); both are tested
// against eager. C10_HOST_DEVICE, so a CUDA translation unit may include them. Sum, mean, prod
// accumulate in double or wrapping int64 (in float, step by step, where eager does: foldsInFloat);
// amax/amin propagate NaN; argmax/argmin and max/min with indices take the first extremum, NaN
// counting as the extremum; any/all test x != 0.
#pragma once

#include "common/scalar_ops.h"

#include <c10/macros/Macros.h>

#include <cstdint>
#include <limits>
#include <type_traits>

namespace tsfuse::reduce_rules {

template <typename T>
using Wide = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

// The identities of max and min.
template <typename T>
C10_HOST_DEVICE constexpr T lowestOf() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::lowest();
}
template <typename T>
C10_HOST_DEVICE constexpr T highestOf() {
  if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::max();
}

// Sum and product steps in the wide domain W (integers wrap).
template <typename W>
C10_HOST_DEVICE inline W sumStep(W acc, W x) {
  if constexpr (std::is_integral_v<W>)
    return W(std::make_unsigned_t<W>(acc) + std::make_unsigned_t<W>(x));
  else
    return acc + x;
}
template <typename W>
C10_HOST_DEVICE inline W prodStep(W acc, W x) {
  if constexpr (std::is_integral_v<W>)
    return W(std::make_unsigned_t<W>(acc) * std::make_unsigned_t<W>(x));
  else
    return acc * x;
}

// Whether eager's CPU sum/mean/prod of `count` values of `type`, along `dimsAboveOne` reduced dims
// of size > 1, is a fold in float32 in index order: ATen's CPU kernels add (multiply) a few float32
// values one after another from 0 (1) in float in torch 2.11: 2-4 values along one inner,
// middle or outer dim, whatever the layout, and 8 values along the dim eager's value holds
// innermost in memory (`innermost`; 8 anywhere else, 5-7 and several reduced dims use other
// orders, which only two values cannot show). There the wide fold rounds every step to float
// (roundedToFloat): double's 53 bits exceed 2 x 24 + 2, so the float rounding of the exact double
// sum (product) of two floats is the float operation's own result, and the fold gives eager's bits.
inline bool foldsInFloat(bool isFloat32, int64_t count, int dimsAboveOne, bool innermost) {
  if (!isFloat32) return false;
  return (count <= 4 && (dimsAboveOne <= 1 || count <= 2)) || (count == 8 && dimsAboveOne == 1 && innermost);
}
template <typename W>
C10_HOST_DEVICE inline W roundedToFloat(W v) {
  if constexpr (std::is_floating_point_v<W>)
    return static_cast<W>(static_cast<float>(v));
  else
    return v;
}

C10_HOST_DEVICE inline double meanOf(double sum, int64_t count) { return sum / static_cast<double>(count); }

// amax/amin: whether x replaces the running extremum v.
template <typename T>
C10_HOST_DEVICE inline bool extremumTakes(T x, T v, bool isMax) {
  return ew::isnan_(x) || (isMax ? x > v : x < v);
}

template <typename T>
C10_HOST_DEVICE inline bool truthOf(T x) {
  return x != T(0);
}

// argmax/argmin: whether x, at an index after best's, replaces it.
template <typename T>
C10_HOST_DEVICE inline bool laterBeats(T x, T best, bool isMax) {
  return !ew::isnan_(best) && (ew::isnan_(x) || (isMax ? x > best : x < best));
}
// The same rule for values met in any index order (partials merged across threads): x at index
// ix replaces best at index ib (ib < 0: none yet).
template <typename T>
C10_HOST_DEVICE inline bool beats(T x, int64_t ix, T best, int64_t ib, bool isMax) {
  if (ib < 0) return true;
  return ix < ib ? !laterBeats(best, x, isMax) : laterBeats(x, best, isMax);
}

}  // namespace tsfuse::reduce_rules
