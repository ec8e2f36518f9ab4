// Accumulators of the native reductions. Each one folds values in index order (merge() takes a
// later partial), with ATen's semantics: NaN propagates through amax/amin, argmax/argmin return
// the first extremum (a NaN counts as the extremum), sums of floats accumulate in double and of
// integers in int64 (wrapping), any/all test truth.
#pragma once

#include "kernels/elementwise.h"
#include "tsfuse/expr.h"

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <limits>
#include <type_traits>

namespace tsfuse::cpu {

template <typename T>
using Wide = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <typename T>
constexpr T lowestOf() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::lowest();
}
template <typename T>
constexpr T highestOf() {
  if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::max();
}

template <typename T>
struct SumAcc {
  using Value = T;
  using Out = T;
  Wide<T> v = 0;
  void add(T x, int64_t) { v += static_cast<Wide<T>>(x); }
  void merge(const SumAcc& o) { v += o.v; }
  Out get(int64_t) const { return ew::cast<T>(v); }
};

template <typename T>
struct MeanAcc : SumAcc<T> {
  void merge(const MeanAcc& o) { this->v += o.v; }
  T get(int64_t count) const { return ew::cast<T>(static_cast<double>(this->v) / static_cast<double>(count)); }
};

template <typename T>
struct ProdAcc {
  using Value = T;
  using Out = T;
  Wide<T> v = 1;
  void add(T x, int64_t) { v *= static_cast<Wide<T>>(x); }
  void merge(const ProdAcc& o) { v *= o.v; }
  Out get(int64_t) const { return ew::cast<T>(v); }
};

template <typename T, bool IsMax>
struct ExtremumAcc {
  using Value = T;
  using Out = T;
  T v = IsMax ? lowestOf<T>() : highestOf<T>();
  void add(T x, int64_t) {
    if (ew::isnan_(x) || (IsMax ? x > v : x < v)) v = x;
  }
  void merge(const ExtremumAcc& o) { add(o.v, 0); }
  Out get(int64_t) const { return v; }
};

template <typename T, bool IsAny>
struct TruthAcc {
  using Value = T;
  using Out = bool;
  bool v = !IsAny;
  void add(T x, int64_t) {
    if constexpr (IsAny) v = v || (x != T(0));
    else v = v && (x != T(0));
  }
  void merge(const TruthAcc& o) { v = IsAny ? (v || o.v) : (v && o.v); }
  Out get(int64_t) const { return v; }
};

template <typename T, bool IsMax>
struct ArgAcc {
  using Value = T;
  using Out = int64_t;
  T best{};
  int64_t idx = -1;
  void add(T x, int64_t i) {
    if (idx < 0 || (!ew::isnan_(best) && (ew::isnan_(x) || (IsMax ? x > best : x < best)))) {
      best = x;
      idx = i;
    }
  }
  void merge(const ArgAcc& o) {
    if (o.idx >= 0) add(o.best, o.idx);
  }
  Out get(int64_t) const { return idx; }
};

template <typename T>
struct AccTag {
  using type = T;
};

// Calls f(AccTag<Acc>{}) with the accumulator for `kind` over values of dtype `t`.
template <typename F>
void dispatchAccumulator(Reduction kind, c10::ScalarType t, F&& f) {
  auto withType = [&](auto typeTag) {
    using T = typename decltype(typeTag)::type;
    switch (kind) {
      case Reduction::Sum: return f(AccTag<SumAcc<T>>{});
      case Reduction::Mean: return f(AccTag<MeanAcc<T>>{});
      case Reduction::Prod: return f(AccTag<ProdAcc<T>>{});
      case Reduction::Amax: return f(AccTag<ExtremumAcc<T, true>>{});
      case Reduction::Amin: return f(AccTag<ExtremumAcc<T, false>>{});
      case Reduction::Any: return f(AccTag<TruthAcc<T, true>>{});
      case Reduction::All: return f(AccTag<TruthAcc<T, false>>{});
      case Reduction::Argmax: return f(AccTag<ArgAcc<T, true>>{});
      case Reduction::Argmin: return f(AccTag<ArgAcc<T, false>>{});
    }
  };
  switch (t) {
    case c10::ScalarType::Bool: return withType(AccTag<bool>{});
    case c10::ScalarType::Byte: return withType(AccTag<uint8_t>{});
    case c10::ScalarType::Char: return withType(AccTag<int8_t>{});
    case c10::ScalarType::Short: return withType(AccTag<int16_t>{});
    case c10::ScalarType::Int: return withType(AccTag<int32_t>{});
    case c10::ScalarType::Long: return withType(AccTag<int64_t>{});
    case c10::ScalarType::Float: return withType(AccTag<float>{});
    case c10::ScalarType::Double: return withType(AccTag<double>{});
    default: TORCH_CHECK(false, "tsfuse: no native reduction over ", t);
  }
}

}  // namespace tsfuse::cpu
