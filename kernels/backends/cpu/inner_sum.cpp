// Eager's inner-sum order (kernels/backends/cpu/inner_sum.h): its parameters, and the once-per-process
// check that at::sum follows it.
#include "kernels/backends/cpu/inner_sum.h"

#include "tsfuse/log.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstring>
#include <limits>

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

template <typename T>
bool sumsMatchEager(c10::ScalarType type, const std::vector<int64_t>& counts, int64_t rows, uint64_t seed,
                    const std::function<T(const T*, int64_t)>& sum, const char* what) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (int64_t count : counts) {
    at::Tensor v = at::randn({rows, count}, gen, at::kDouble);
    v.mul_(at::randn({rows, count}, gen, at::kDouble).mul_(3).exp_());
    v = v.to(type);
    const at::Tensor eager = v.sum(-1);
    for (int64_t r = 0; r < rows; ++r) {
      const T got = sum(v.const_data_ptr<T>() + r * count, count);
      if (std::memcmp(&got, eager.const_data_ptr<T>() + r, sizeof(T)) != 0) {
        TSFUSE_LOG(kernel, info, "at::sum of ", count, " ", c10::toString(type), " values ", what);
        return false;
      }
    }
  }
  return true;
}
template bool sumsMatchEager<float>(c10::ScalarType, const std::vector<int64_t>&, int64_t, uint64_t,
                                    const std::function<float(const float*, int64_t)>&, const char*);
template bool sumsMatchEager<double>(c10::ScalarType, const std::vector<int64_t>&, int64_t, uint64_t,
                                     const std::function<double(const double*, int64_t)>&, const char*);

namespace {

// Each length takes a different branch of the rule (scalar path with and without the rotation,
// vectors with and without values after them and left-over vectors, the longest modelled row).
// The check runs inside some fused op's first call, so its buffers stay small (three of 32 x 511
// doubles).
template <typename T>
bool probeMatches(c10::ScalarType type, int64_t longest) {
  const std::vector<int64_t> counts{3, 7, 9, 27, 64, 100, longest};
  return sumsMatchEager<T>(
      type, counts, 32, 20261126,
      [](const T* row, int64_t count) {
        const auto order = InnerSumOrder::of(count, sizeof(T));
        if (!order) return T(std::numeric_limits<T>::quiet_NaN());  // never equal: unmodelled
        InnerSumLanes<T> fold(*order, 1);
        fold.reset(1);
        for (int64_t d = 0; d < count; ++d) fold.add(&row[d]);
        T got;
        fold.result(&got);
        return got;
      },
      "do not follow the modelled inner-sum order; such sums keep their tolerance");
}

}  // namespace

bool eagerSumsInnerInOrder() {
  static const bool matches = [] {
    return probeMatches<float>(at::kFloat, 8 * 4 * InnerSumOrder::kMaxGroups - 1) &&
           probeMatches<double>(at::kDouble, 4 * 4 * InnerSumOrder::kMaxGroups - 1);
  }();
  return matches;
}

std::optional<InnerSumOrder> eagerInnerSumOrder(c10::ScalarType type, int64_t count, int dimsAboveOne, bool innermost) {
  if ((type != c10::ScalarType::Float && type != c10::ScalarType::Double) || dimsAboveOne != 1 || !innermost)
    return std::nullopt;
  auto order = InnerSumOrder::of(count, c10::elementSize(type));
  if (!order || !eagerSumsInnerInOrder()) return std::nullopt;
  return order;
}

}  // namespace tsfuse::cpu
