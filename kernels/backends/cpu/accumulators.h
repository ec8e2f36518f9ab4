// Accumulators of the native CPU reductions. Each one folds values in index order (merge() takes
// a later partial) with the rules of kernels/backends/reduction_rules.h (ATen's semantics, shared with the
// CUDA kernels). logsumexp and norm work in double (within reduction tolerance of eager, which
// works in the value's dtype); var/std follow ATen's CPU Welford algorithm, in double as ATen's.
#pragma once

#include "common/dtype_dispatch.h"
#include "common/scalar_ops.h"
#include "kernels/ir/expr.h"
#include "kernels/backends/reduction_rules.h"

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tsfuse::cpu {

namespace rules = reduce_rules;
using rules::Wide;

template <typename T>
struct SumAcc {
  using Value = T;
  using Out = T;
  Wide<T> v = 0;
  bool inFloat = false;  // rules::foldsInFloat: every step rounded to float
  void add(T x, int64_t) { v = step(rules::sumStep(v, static_cast<Wide<T>>(x))); }
  void merge(const SumAcc& o) { v = step(rules::sumStep(v, o.v)); }
  Wide<T> step(Wide<T> s) const { return inFloat ? rules::roundedToFloat(s) : s; }
  Out get(int64_t) const { return ew::cast<T>(v); }
};

template <typename T>
struct MeanAcc : SumAcc<T> {
  void merge(const MeanAcc& o) { this->v = this->step(rules::sumStep(this->v, o.v)); }
  T get(int64_t count) const { return ew::cast<T>(rules::meanOf(static_cast<double>(this->v), count)); }
};

template <typename T>
struct ProdAcc {
  using Value = T;
  using Out = T;
  Wide<T> v = 1;
  bool inFloat = false;  // rules::foldsInFloat: every step rounded to float
  void add(T x, int64_t) { v = step(rules::prodStep(v, static_cast<Wide<T>>(x))); }
  void merge(const ProdAcc& o) { v = step(rules::prodStep(v, o.v)); }
  Wide<T> step(Wide<T> s) const { return inFloat ? rules::roundedToFloat(s) : s; }
  Out get(int64_t) const { return ew::cast<T>(v); }
};

template <typename T, bool IsMax>
struct ExtremumAcc {
  using Value = T;
  using Out = T;
  T v = IsMax ? rules::lowestOf<T>() : rules::highestOf<T>();
  void add(T x, int64_t) {
    if (rules::extremumTakes(x, v, IsMax)) v = x;
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
    if constexpr (IsAny)
      v = v || rules::truthOf(x);
    else
      v = v && rules::truthOf(x);
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
    if (idx < 0 || rules::laterBeats(x, best, IsMax)) {
      best = x;
      idx = i;
    }
  }
  void merge(const ArgAcc& o) {
    if (o.idx >= 0) add(o.best, o.idx);
  }
  Out get(int64_t) const { return idx; }
};

// max/min over one dim returning (value, index).
struct IndexedTag {};
template <typename T, bool IsMax>
struct ValueIndexAcc : ArgAcc<T, IsMax>, IndexedTag {
  using Out = T;
  Out get(int64_t) const { return this->best; }
  int64_t index() const { return this->idx; }
  void merge(const ValueIndexAcc& o) { ArgAcc<T, IsMax>::merge(o); }
};

// logsumexp, streamed: s = sum(exp(x - m)) for the running maximum m, rescaled when m grows.
// NaN wins; +inf gives +inf; no finite element (all -inf or none) gives -inf.
template <typename T>
struct LogsumexpAcc {
  using Value = T;
  using Out = T;
  double m = -std::numeric_limits<double>::infinity();
  double s = 0.0;
  bool nan = false, posInf = false;
  void addScaled(double x, double weight) {
    if (x > m) {
      s = s * std::exp(m - x) + weight;
      m = x;
    } else {
      s += weight * std::exp(x - m);
    }
  }
  void add(T v, int64_t) {
    const double x = static_cast<double>(v);
    if (x != x)
      nan = true;
    else if (x == std::numeric_limits<double>::infinity())
      posInf = true;
    else if (x != -std::numeric_limits<double>::infinity())
      addScaled(x, 1.0);
  }
  void merge(const LogsumexpAcc& o) {
    nan |= o.nan;
    posInf |= o.posInf;
    if (o.s > 0) addScaled(o.m, o.s);
  }
  Out get(int64_t) const {
    if (nan) return ew::cast<T>(std::numeric_limits<double>::quiet_NaN());
    if (posInf) return ew::cast<T>(std::numeric_limits<double>::infinity());
    if (s == 0) return ew::cast<T>(-std::numeric_limits<double>::infinity());
    return ew::cast<T>(std::log(s) + m);
  }
};

// torch.linalg.vector_norm of order p: sum(|x|^p)^(1/p); p = inf / -inf: max / min |x|; p = 0:
// the count of non-zeros. Special-cased p = 1 and 2 avoid pow.
template <typename T>
struct NormAcc {
  using Value = T;
  using Out = T;
  enum class Mode : uint8_t { Two, One, Max, Min, Zero, General };
  double p = 2.0;
  Mode mode = Mode::Two;
  double s = 0.0;
  explicit NormAcc(double order = 2.0) : p(order) {
    const double inf = std::numeric_limits<double>::infinity();
    mode = p == 2      ? Mode::Two
           : p == 1    ? Mode::One
           : p == inf  ? Mode::Max
           : p == -inf ? Mode::Min
           : p == 0    ? Mode::Zero
                       : Mode::General;
    if (mode == Mode::Min) s = inf;
  }
  void fold(double a) {
    switch (mode) {
      case Mode::Two:
        s += a * a;
        break;
      case Mode::One:
        s += a;
        break;
      case Mode::Max:
        if (rules::extremumTakes(a, s, true)) s = a;
        break;
      case Mode::Min:
        if (rules::extremumTakes(a, s, false)) s = a;
        break;
      case Mode::Zero:
        s += (a != 0.0);
        break;
      case Mode::General:
        s += std::pow(a, p);
        break;
    }
  }
  void add(T v, int64_t) { fold(std::fabs(static_cast<double>(v))); }
  void merge(const NormAcc& o) {
    if (mode == Mode::Max || mode == Mode::Min)
      fold(o.s);
    else
      s += o.s;
  }
  Out get(int64_t) const {
    // NB: eager sums |x|^p in float for float inputs; every term is >= 0, so its sum overflows to
    // inf exactly when ours (in double) exceeds float's range — reproduce that before the root.
    double sum = s;
    if constexpr (!std::is_same_v<T, double>)
      if (mode != Mode::Max && mode != Mode::Min && sum > std::numeric_limits<float>::max())
        sum = std::numeric_limits<double>::infinity();
    if (mode == Mode::Two) return ew::cast<T>(std::sqrt(sum));
    if (mode == Mode::General) return ew::cast<T>(std::pow(sum, 1.0 / p));
    return ew::cast<T>(sum);
  }
};

// var/std: Welford's algorithm in double with ATen's update and merge steps (ATen's CPU kernel for
// float and double values), so the result differs from eager only by where eager splits the
// reduced space between threads, and by its two-pass formula for a single output (README,
// "Exactness of reductions"). The divisor is max(count - correction, 0): a correction >= count
// gives inf (or NaN for zero spread), as in eager; no element at all gives NaN.
template <typename T>
struct WelfordAcc {
  using Value = T;
  using Out = T;
  double mean = 0.0, m2 = 0.0, nf = 0.0;
  int64_t n = 0;
  double correction = 1.0;
  bool takeSqrt = false;
  WelfordAcc() = default;
  WelfordAcc(double c, bool root) : correction(c), takeSqrt(root) {}
  void add(T v, int64_t) {
    const double x = static_cast<double>(v);
    ++n;
    nf = static_cast<double>(n);
    const double delta = x - mean;
    mean += delta / nf;
    m2 += delta * (x - mean);
  }
  void merge(const WelfordAcc& o) {
    if (o.nf == 0) return;
    if (nf == 0) {
      mean = o.mean, m2 = o.m2, nf = o.nf, n = o.n;
      return;
    }
    const double delta = o.mean - mean, count = nf + o.nf, bOverN = o.nf / count;
    mean += delta * bOverN;
    m2 = m2 + o.m2 + delta * delta * nf * bOverN;
    nf = count;
    n += o.n;
  }
  Out get(int64_t) const {
    if (n == 0) return ew::cast<T>(std::numeric_limits<double>::quiet_NaN());
    const double divisor = nf > correction ? nf - correction : 0.0;
    const double var = m2 / divisor;
    return ew::cast<T>(takeSqrt ? std::sqrt(var) : var);
  }
};

// Calls f(Tag<Acc>{}) with the accumulator for `kind` over values of dtype `t`.
template <typename F>
void dispatchAccumulator(Reduction kind, c10::ScalarType t, F&& f) {
  auto withType = [&](auto typeTag) {
    using T = typename decltype(typeTag)::type;
    switch (kind) {
      case Reduction::Sum:
        return f(Tag<SumAcc<T>>{});
      case Reduction::Mean:
        return f(Tag<MeanAcc<T>>{});
      case Reduction::Prod:
        return f(Tag<ProdAcc<T>>{});
      case Reduction::Amax:
        return f(Tag<ExtremumAcc<T, true>>{});
      case Reduction::Amin:
        return f(Tag<ExtremumAcc<T, false>>{});
      case Reduction::Any:
        return f(Tag<TruthAcc<T, true>>{});
      case Reduction::All:
        return f(Tag<TruthAcc<T, false>>{});
      case Reduction::Argmax:
        return f(Tag<ArgAcc<T, true>>{});
      case Reduction::Argmin:
        return f(Tag<ArgAcc<T, false>>{});
      case Reduction::Max:
        return f(Tag<ValueIndexAcc<T, true>>{});
      case Reduction::Min:
        return f(Tag<ValueIndexAcc<T, false>>{});
      case Reduction::Logsumexp:
        return f(Tag<LogsumexpAcc<T>>{});
      case Reduction::Norm:
        return f(Tag<NormAcc<T>>{});
      case Reduction::Var:
      case Reduction::Std:
        return f(Tag<WelfordAcc<T>>{});
    }
  };
  dispatchNative(t, withType);
}

}  // namespace tsfuse::cpu
