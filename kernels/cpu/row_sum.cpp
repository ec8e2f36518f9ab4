// Eager's cascade sum of whole rows (kernels/cpu/row_sum.h) and its once-per-process check.
#include "kernels/cpu/row_sum.h"

#include "tsfuse/log.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstring>

namespace tsfuse::cpu {
namespace {

constexpr int kPartials = 4;  // row_sum's ILP factor
constexpr int kLevels = 4;    // multi_row_sum's cascade levels
constexpr int64_t kVectorBytes = 32;

// ATen's ceil_log2: 1 up to 2.
int64_t ceilLog2(int64_t x) {
  if (x <= 2) return 1;
  int64_t bits = 0;
  for (uint64_t u = static_cast<uint64_t>(x - 1); u; u >>= 1) ++bits;
  return bits;
}

// Partial vectors of L lanes: each lane's additions are independent, so plain lane loops (which
// the compiler vectorizes) give the same bits as ATen's vector instructions.
template <typename T, int L>
struct Partials {
  T p[kPartials][L];
  void clear() { std::fill(&p[0][0], &p[0][0] + kPartials * L, T(0)); }
  void addGroup(const T* g) {  // four consecutive vectors
    for (int k = 0; k < kPartials; ++k)
      for (int l = 0; l < L; ++l) p[k][l] += g[k * L + l];
  }
  void add(const Partials& o) {
    for (int k = 0; k < kPartials; ++k)
      for (int l = 0; l < L; ++l) p[k][l] += o.p[k][l];
  }
};

template <typename T, int L>
T rowSum(const T* v, int64_t n) {
  const int64_t vectors = n / L, groups = vectors / kPartials;
  const int64_t power = std::max<int64_t>(4, ceilLog2(groups) / kLevels);
  const int64_t step = int64_t(1) << power, mask = step - 1;
  Partials<T, L> acc[kLevels];
  for (auto& a : acc) a.clear();
  int64_t i = 0;
  while (i + step <= groups) {
    for (int64_t j = 0; j < step; ++j, ++i) acc[0].addGroup(v + i * kPartials * L);
    for (int j = 1; j < kLevels; ++j) {
      acc[j].add(acc[j - 1]);
      acc[j - 1].clear();
      if ((i & (mask << (j * power))) != 0) break;
    }
  }
  for (; i < groups; ++i) acc[0].addGroup(v + i * kPartials * L);
  for (int j = 1; j < kLevels; ++j) acc[0].add(acc[j]);
  T (&p)[kPartials][L] = acc[0].p;
  for (int64_t q = groups * kPartials; q < vectors; ++q)
    for (int l = 0; l < L; ++l) p[0][l] += v[q * L + l];
  T sum = 0;
  for (int64_t k = vectors * L; k < n; ++k) sum += v[k];
  for (int l = 0; l < L; ++l) sum += ((p[0][l] + p[1][l]) + p[2][l]) + p[3][l];
  return T(0) + sum;
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
  constexpr int L = kVectorBytes / sizeof(T);
  return n < L ? rowSum<T, 1>(v, n) : rowSum<T, L>(v, n);
}
template float eagerRowSum<float>(const float*, int64_t);
template double eagerRowSum<double>(const double*, int64_t);

bool eagerSumsRowsInCascade() {
  static const bool matches = probeMatches<float>(at::kFloat) && probeMatches<double>(at::kDouble);
  return matches;
}

}  // namespace tsfuse::cpu
