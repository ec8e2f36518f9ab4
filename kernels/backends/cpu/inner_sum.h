// Eager's order for a float sum along the dim its value holds innermost: the one description of
// it, which the interpreted reductions (InnerSumLanes) and the compiled kernels
// (jit::Sink::SumInner) follow, so both give eager's bits. Whether this torch build sums that way
// is checked once per process against at::sum (eagerSumsInnerInOrder); where it does not, no
// order applies and the sums keep their tolerance.
#pragma once

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <functional>
#include <cstdint>
#include <optional>
#include <vector>

namespace tsfuse::cpu {

// ATen's CPU sum (and mean, a sum then a division) of float32/float64 values along the innermost
// dim of its input, the only reduced dim of size > 1 (SumKernel.cpp's cascade_sum ->
// vectorized_inner_sum / scalar_inner_sum), with L the elements of one 32-byte vector (8 float32,
// 4 float64: x86's sum kernel has no AVX-512 build), V = count / L vectors and G = V / 4:
//  * each lane l of the vectors keeps four partial sums, from 0: vector v < 4G adds into partial
//    v % 4, the V % 4 vectors after those into partial 0;
//  * lane l's sum is ((p0 + p1) + p2) + p3;
//  * the row's sum starts from 0, adds the count % L values after the vectors in index order, then
//    the lane sums in lane order.
// Rows shorter than a vector (scalar_inner_sum) follow the same rule with L = 1. From G = 16 on,
// ATen moves the partials through further levels every 16 groups: not modelled (no order then).
struct InnerSumOrder {
  static constexpr int kPartials = 4;
  static constexpr int64_t kVectorBytes = 32;
  static constexpr int64_t kMaxGroups = 16;  // exclusive: ATen's cascade levels start there
  static constexpr int64_t kMaxLanes = kVectorBytes / 4;

  int64_t lanes = 1;    // L
  int64_t vectors = 0;  // V: values per lane
  int64_t groups = 0;   // G: vectors that rotate through the four partials, by four
  int64_t rest = 0;     // values after the vectors, added first

  // The order for `count` values of `elemSize` bytes, where ATen's is this one.
  static std::optional<InnerSumOrder> of(int64_t count, int64_t elemSize);
  // Where value d goes: -1 (after the vectors), else lane * kPartials + partial.
  int slotOf(int64_t d) const {
    if (d >= vectors * lanes) return -1;
    const int64_t v = d / lanes;
    return static_cast<int>((d % lanes) * kPartials + (v < groups * kPartials ? v % kPartials : 0));
  }
  int slots() const { return static_cast<int>(lanes * kPartials); }
};

// Eager's order for a sum/mean of `count` values of `type` (the dtype they are summed in) along
// `dimsAboveOne` reduced dims of size > 1, the one there is `innermost` in eager's value; nullopt
// where another order applies or this build does not sum as modelled.
std::optional<InnerSumOrder> eagerInnerSumOrder(c10::ScalarType type, int64_t count, int dimsAboveOne, bool innermost);
// Whether at::sum of this process follows InnerSumOrder (checked once, on probe rows).
bool eagerSumsInnerInOrder();

// The probe behind such checks: for each length in `counts`, `rows` rows whose values span many
// magnitudes (so that orders round differently), each summed by `sum(row, count)` and compared
// with at::sum's bits along the rows (more than one row: eager sums each whole). Logs `what`
// where one differs. T: float or double, `type` its dtype.
template <typename T>
bool sumsMatchEager(c10::ScalarType type, const std::vector<int64_t>& counts, int64_t rows, uint64_t seed,
                    const std::function<T(const T*, int64_t)>& sum, const char* what);

// Sums in that order for n lanes at once (one row's sum per lane; n = 1: one row's values), the
// reduced row d's n values at a time, d = 0, 1, ...: the interpreter's sums (the compiled
// kernels' reference). T: float or double; every step is an operation in T.
template <typename T>
class InnerSumLanes {
 public:
  InnerSumLanes(const InnerSumOrder& o, int64_t capacity)
      : o_(o), cap_(capacity), partial_((o.slots() + 1) * capacity) {}
  void reset(int64_t n) {
    std::fill(partial_.begin(), partial_.end(), T(0));
    n_ = n;
    next_ = 0;
  }
  // The n values of the next reduced row.
  void add(const T* v) {
    const int s = o_.slotOf(next_++);
    T* p = &partial_[(s < 0 ? o_.slots() : s) * cap_];
    for (int64_t j = 0; j < n_; ++j) p[j] = p[j] + v[j];
  }
  // The lanes' sums.
  void result(T* out) const {
    const T* after = &partial_[o_.slots() * cap_];
    for (int64_t j = 0; j < n_; ++j) out[j] = after[j];
    for (int64_t l = 0; l < o_.lanes; ++l) {
      const T* p = &partial_[l * InnerSumOrder::kPartials * cap_];
      for (int64_t j = 0; j < n_; ++j) out[j] = out[j] + (((p[j] + p[cap_ + j]) + p[2 * cap_ + j]) + p[3 * cap_ + j]);
    }
  }

 private:
  InnerSumOrder o_;
  int64_t cap_, n_ = 0, next_ = 0;
  std::vector<T> partial_;  // per slot, then the values after the vectors: cap_ lanes each
};

}  // namespace tsfuse::cpu
