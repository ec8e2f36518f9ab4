// Scalar semantics of the natively evaluated ops, shared by the CPU tile evaluator and (later) the
// CUDA kernels. Each function reproduces what ATen's vectorized CPU kernel computes for the op,
// bit for bit: the same comparison order for min/max/clamp (which decides signed zeros), NaN
// propagation, and wrapping integer arithmetic (the kernels are compiled with -fwrapv).
#pragma once

#include <c10/macros/Macros.h>
#include <c10/util/TypeCast.h>

#include <cmath>
#include <limits>
#include <type_traits>

namespace tsfuse::ew {

template <typename T>
C10_HOST_DEVICE inline bool isnan_(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  return false;
}

template <typename T>
C10_HOST_DEVICE inline T quietNaN() {
  return std::numeric_limits<T>::quiet_NaN();
}

// at::minimum / at::maximum: NaN if either is NaN; otherwise the vector unit's min/max, which
// returns the second operand when the two compare equal (so minimum(0., -0.) is -0.).
template <typename T>
C10_HOST_DEVICE inline T minimum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a || b != b) return quietNaN<T>();
  }
  return a < b ? a : b;
}
template <typename T>
C10_HOST_DEVICE inline T maximum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a || b != b) return quietNaN<T>();
  }
  return a > b ? a : b;
}

// clamp with Scalar bounds: max(lo, a) then min(hi, .) with the bound as the first operand, so a
// NaN input passes through and a NaN bound is ignored, as in ATen's vectorized clamp kernels.
template <typename T>
C10_HOST_DEVICE inline T clampMin(T a, T lo) {
  return lo > a ? lo : a;
}
template <typename T>
C10_HOST_DEVICE inline T clampMax(T a, T hi) {
  return hi < a ? hi : a;
}

template <typename T>
C10_HOST_DEVICE inline T abs_(T a) {
  if constexpr (std::is_same_v<T, bool>) {
    return a;
  } else if constexpr (std::is_floating_point_v<T>) {
    return std::fabs(a);
  } else if constexpr (std::is_unsigned_v<T>) {
    return a;
  } else {
    return static_cast<T>(a < 0 ? -a : a);
  }
}

template <typename To, typename From>
C10_HOST_DEVICE inline To cast(From v) {
  return c10::static_cast_with_inter_type<To, From>::apply(v);
}

}  // namespace tsfuse::ew
