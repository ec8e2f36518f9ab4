// Dtype -> C++ type dispatch, once for every host-side user: f(Tag<T>{}) with T the element type.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <cstdint>

namespace tsfuse {

// The integers floating dtype t holds exactly: |x| <= 2^24 in float32, 2^53 in float64 (its
// significand's bits and one). Integers within it compare in t as they do in an integer dtype.
constexpr int64_t exactIntegerBound(c10::ScalarType t) {
  return int64_t(1) << (t == c10::ScalarType::Double ? 53 : 24);
}

// Whether integer dtype t holds v. Eager casts a number compared with a t tensor to t, wrapping
// one outside it: a uint8 tensor > -1 compares with 255, so is false everywhere.
constexpr bool holdsInteger(c10::ScalarType t, int64_t v) {
  switch (t) {
    case c10::ScalarType::Byte:
      return v >= 0 && v <= 255;
    case c10::ScalarType::Char:
      return v >= -128 && v <= 127;
    case c10::ScalarType::Short:
      return v >= -32768 && v <= 32767;
    case c10::ScalarType::Int:
      return v >= -(int64_t(1) << 31) && v < (int64_t(1) << 31);
    case c10::ScalarType::Long:
      return true;
    default:
      return false;
  }
}

// Whether a compare of tensors of integer dtype `integer` with number v gives eager's results when
// it runs in floating dtype `floating`: eager does not wrap v (holdsInteger), and `floating` holds
// it exactly (exactIntegerBound), as it holds the tensors' values.
constexpr bool comparesExactlyIn(c10::ScalarType integer, c10::ScalarType floating, int64_t v) {
  return holdsInteger(integer, v) && v >= -exactIntegerBound(floating) && v <= exactIntegerBound(floating);
}

template <typename T>
struct Tag {
  using type = T;
};

// The dtypes the CPU kernels compute in natively (bool, integers, float32, float64).
template <typename F>
decltype(auto) dispatchNative(c10::ScalarType t, F&& f) {
  switch (t) {
    case c10::ScalarType::Bool:
      return f(Tag<bool>{});
    case c10::ScalarType::Byte:
      return f(Tag<uint8_t>{});
    case c10::ScalarType::Char:
      return f(Tag<int8_t>{});
    case c10::ScalarType::Short:
      return f(Tag<int16_t>{});
    case c10::ScalarType::Int:
      return f(Tag<int32_t>{});
    case c10::ScalarType::Long:
      return f(Tag<int64_t>{});
    case c10::ScalarType::Float:
      return f(Tag<float>{});
    case c10::ScalarType::Double:
      return f(Tag<double>{});
    default:
      TORCH_CHECK(false, "tsfuse: dtype ", t, " has no native CPU evaluation");
  }
}

// The native dtypes and the half types a device program holds.
template <typename F>
decltype(auto) dispatchHeld(c10::ScalarType t, F&& f) {
  if (t == c10::ScalarType::Half) return f(Tag<c10::Half>{});
  if (t == c10::ScalarType::BFloat16) return f(Tag<c10::BFloat16>{});
  return dispatchNative(t, f);
}

}  // namespace tsfuse
