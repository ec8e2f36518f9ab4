// Eager's inner-sum order (kernels/cpu/inner_sum.h): its parameters, and the once-per-process
// check that at::sum follows it.
#include "kernels/cpu/inner_sum.h"

#include "tsfuse/log.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstring>

namespace tsfuse::cpu {

std::optional<InnerSumOrder> InnerSumOrder::of(int64_t count, int64_t elemSize) {
  if (count < 1 || (elemSize != 4 && elemSize != 8)) return std::nullopt;
  InnerSumOrder o;
  o.lanes = kVectorBytes / elemSize;
  if (count < o.lanes) o.lanes = 1;  // scalar_inner_sum
  o.vectors = count / o.lanes;
  o.groups = o.vectors / kPartials;
  o.rest = count - o.vectors * o.lanes;
  if (o.groups >= kMaxGroups) return std::nullopt;
  return o;
}

namespace {

// Probe rows whose values span many magnitudes, so that orders round differently; each length
// takes a different branch of the rule (scalar path with and without the rotation, vectors with
// and without values after them and left-over vectors, the longest modelled row). The check runs
// inside some fused op's first call, so its buffers stay small (three of kRows x 511 doubles).
template <typename T>
bool probeMatches(c10::ScalarType type, int64_t longest) {
  constexpr int64_t kRows = 32;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(20261126);
  for (int64_t count : {int64_t(3), int64_t(7), int64_t(9), int64_t(27), int64_t(64), int64_t(100), longest}) {
    at::Tensor v = at::randn({kRows, count}, gen, at::kDouble);
    v.mul_(at::randn({kRows, count}, gen, at::kDouble).mul_(3).exp_());
    v = v.to(type);
    const at::Tensor eager = v.sum(-1);
    const auto order = InnerSumOrder::of(count, sizeof(T));
    if (!order) return false;
    const T* rows = v.data_ptr<T>();
    const T* want = eager.data_ptr<T>();
    InnerSumLanes<T> fold(*order, 1);
    for (int64_t r = 0; r < kRows; ++r) {
      fold.reset(1);
      for (int64_t d = 0; d < count; ++d) fold.add(&rows[r * count + d]);
      T got;
      fold.result(&got);
      if (std::memcmp(&got, &want[r], sizeof(T)) != 0) {
        TSFUSE_LOG(kernel, info, "at::sum of ", count, " ", c10::toString(type),
                   " values does not follow the modelled inner-sum order; such sums keep their tolerance");
        return false;
      }
    }
  }
  return true;
}

}  // namespace

bool eagerSumsInnerInOrder() {
  static const bool matches = [] {
    return probeMatches<float>(at::kFloat, 8 * 4 * InnerSumOrder::kMaxGroups - 1) &&
           probeMatches<double>(at::kDouble, 4 * 4 * InnerSumOrder::kMaxGroups - 1);
  }();
  return matches;
}

std::optional<InnerSumOrder> eagerInnerSumOrder(c10::ScalarType type, int64_t count, int dimsAboveOne,
                                                bool innermost) {
  if ((type != c10::ScalarType::Float && type != c10::ScalarType::Double) || dimsAboveOne != 1 || !innermost)
    return std::nullopt;
  auto order = InnerSumOrder::of(count, c10::elementSize(type));
  if (!order || !eagerSumsInnerInOrder()) return std::nullopt;
  return order;
}

}  // namespace tsfuse::cpu
