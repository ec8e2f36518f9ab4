// Eager's cascade sum of whole rows (kernels/cpu/row_sum.h) and its once-per-process check.
#include "kernels/cpu/row_sum.h"

#include "tsfuse/log.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstring>

namespace tsfuse::cpu {
namespace {

namespace base {
#include "kernels/cpu/row_sum.inc"
}  // namespace base
#if defined(__x86_64__) && defined(__GNUC__)
#define TSFUSE_HAVE_AVX2_ROW_SUM 1
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
#include "kernels/cpu/row_sum.inc"
}  // namespace avx2
#pragma GCC pop_options
#endif

template <typename T>
using RowSumFn = T (*)(const T*, int64_t);

// The rows' loops for this CPU: AVX2 where it has it (the same bits: one add per lane either way).
template <typename T, int L>
RowSumFn<T> rowSumFor() {
#ifdef TSFUSE_HAVE_AVX2_ROW_SUM
  if (__builtin_cpu_supports("avx2")) return avx2::rowSum<T, L>;
#endif
  return base::rowSum<T, L>;
}

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

template <typename T>
T eagerRowSum(const T* v, int64_t n) {
  constexpr int L = 32 / sizeof(T);  // ATen's sum kernel: 32-byte vectors (it has no AVX-512 build)
  static const RowSumFn<T> vectors = rowSumFor<T, L>(), scalars = rowSumFor<T, 1>();
  return n < L ? scalars(v, n) : vectors(v, n);
}
template float eagerRowSum<float>(const float*, int64_t);
template double eagerRowSum<double>(const double*, int64_t);

bool eagerSumsRowsInCascade() {
  static const bool matches = probeMatches<float>(at::kFloat) && probeMatches<double>(at::kDouble);
  return matches;
}

}  // namespace tsfuse::cpu
