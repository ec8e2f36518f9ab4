// The once-per-process check that at::sum follows eagerRowSum (kernels/cpu/row_sum.h; its loops
// are compiled per instruction set with the tile ops, in tile_program.cpp).
#include "kernels/cpu/row_sum.h"

#include "tsfuse/log.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstring>

namespace tsfuse::cpu {
namespace {

// Probe rows whose values span many magnitudes, so that orders round differently, of lengths
// that take each branch: scalar rows, vectors with and without values and vectors after the
// groups, and groups past the first cascade level's 16 and the second's 256.
template <typename T>
bool probeMatches(c10::ScalarType type) {
  constexpr int64_t kRows = 4;  // more than one output: eager sums each row whole
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(20261128);
  for (int64_t count : {int64_t(3), int64_t(7), int64_t(9), int64_t(100), int64_t(511), int64_t(1024),
                        int64_t(4099), int64_t(16 * 16 * 4 * 8 + 4 * 8 * 17 + 13)}) {
    at::Tensor v = at::randn({kRows, count}, gen, at::kDouble);
    v.mul_(at::randn({kRows, count}, gen, at::kDouble).mul_(3).exp_());
    v = v.to(type);
    const at::Tensor eager = v.sum(-1);
    for (int64_t r = 0; r < kRows; ++r) {
      const T got = eagerRowSum(v.const_data_ptr<T>() + r * count, count);
      if (std::memcmp(&got, eager.const_data_ptr<T>() + r, sizeof(T)) != 0) {
        TSFUSE_LOG(kernel, info, "at::sum of ", count, " ", c10::toString(type),
                   " values does not follow the modelled cascade; their rows are summed by ATen");
        return false;
      }
    }
  }
  return true;
}

}  // namespace

bool eagerSumsRowsInCascade() {
  static const bool matches = probeMatches<float>(at::kFloat) && probeMatches<double>(at::kDouble);
  return matches;
}

}  // namespace tsfuse::cpu
