#include "kernels/backends/cpu/row_extremum.h"

#include "kernels/backends/cpu/tile_program.h"

#include <ATen/Parallel.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TSFUSE_ROW_EXTREMUM_AVX2 1
#endif

#include <limits>

namespace tsfuse::cpu {
namespace {

#ifdef TSFUSE_ROW_EXTREMUM_AVX2
#pragma GCC push_options
#pragma GCC target("avx2")  // called only where the CPU has it (usingAvx2)

// The vector ops one pass needs, for the minimum or the maximum.
template <bool IsMax>
struct Ext {
  static __m256 pick(__m256 a, __m256 b) { return IsMax ? _mm256_max_ps(a, b) : _mm256_min_ps(a, b); }
  static float pick(float a, float b) { return IsMax ? (b > a ? b : a) : (b < a ? b : a); }
  static constexpr float kIdentity =
      IsMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
};

// The first index whose value satisfies `hit` (a vector predicate and its scalar form); n if none.
template <typename VectorHit, typename ScalarHit>
int64_t firstHit(const float* x, int64_t n, VectorHit vhit, ScalarHit shit) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int mask = _mm256_movemask_ps(vhit(_mm256_loadu_ps(x + i)));
    if (mask) return i + __builtin_ctz(static_cast<unsigned>(mask));
  }
  for (; i < n; ++i)
    if (shit(x[i])) return i;
  return n;
}

// Pass 1: the row's extremum over its non-NaN values and whether it has a NaN (four independent
// accumulators: min/max latency, not throughput, would bound one; then combined in registers).
// NB: minps/maxps return their second operand when either is NaN, so a NaN lane value only matters
// when `nan` says so, and then pass 2 looks for the NaN instead. Pass 2: the first index holding it.
struct RowExtremum {
  float best;
  bool anyNaN;
};

template <bool IsMax>
RowExtremum extremumOf(const float* x, int64_t n) {
  using E = Ext<IsMax>;
  __m256 acc[4];
  for (auto& a : acc) a = _mm256_set1_ps(E::kIdentity);
  __m256 nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * k);
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
      acc[k] = E::pick(acc[k], v);
    }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    acc[0] = E::pick(acc[0], v);
  }
  __m256 m = E::pick(E::pick(acc[0], acc[1]), E::pick(acc[2], acc[3]));
  m = E::pick(m, _mm256_permute2f128_ps(m, m, 1));
  m = E::pick(m, _mm256_shuffle_ps(m, m, 0x4E));
  m = E::pick(m, _mm256_shuffle_ps(m, m, 0xB1));
  RowExtremum r{_mm256_cvtss_f32(m), _mm256_movemask_ps(nan) != 0};
  for (; i < n; ++i) {
    if (x[i] != x[i])
      r.anyNaN = true;
    else
      r.best = E::pick(r.best, x[i]);
  }
  return r;
}

int64_t firstIndexOf(const float* x, int64_t n, const RowExtremum& r) {
  if (r.anyNaN)
    return firstHit(
        x, n, [](__m256 v) { return _mm256_cmp_ps(v, v, _CMP_UNORD_Q); }, [](float v) { return v != v; });
  const float best = r.best;
  const __m256 target = _mm256_set1_ps(best);
  return firstHit(
      x, n, [&](__m256 v) { return _mm256_cmp_ps(v, target, _CMP_EQ_OQ); }, [&](float v) { return v == best; });
}

template <bool IsMax>
int64_t firstExtremum(const float* x, int64_t n) {
  return firstIndexOf(x, n, extremumOf<IsMax>(x, n));
}

// The first extremum's value: the extremum's own bits unless it is a zero (-0.0 and 0.0 are equal:
// the first one's sign) or a NaN (the first NaN's bits).
template <bool IsMax>
float firstExtremumValueOf(const float* x, int64_t n) {
  const RowExtremum r = extremumOf<IsMax>(x, n);
  return r.anyNaN || r.best == 0.0f ? x[firstIndexOf(x, n, r)] : r.best;
}

// Short rows (n < kShortRow): eight rows at a time, one row a lane, walking the columns in order
// with ATen's own step (take a value below the best, or a NaN while the best is not one). A
// horizontal pass would reduce 32 accumulator lanes for a row of 8 (k-means' argmin over a few
// centroids per point).
constexpr int64_t kShortRow = 24;

template <bool IsMax>
void firstExtremaOfEightRows(const float* x, int64_t n, int64_t* index) {
  const __m256i rowOffsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(int(n)));
  __m256 best = _mm256_i32gather_ps(x, rowOffsets, 4);
  __m256 at = _mm256_setzero_ps();  // int32 indices, as float bits for the blends
  for (int64_t k = 1; k < n; ++k) {
    const __m256 v = _mm256_i32gather_ps(x + k, rowOffsets, 4);
    const __m256 better = IsMax ? _mm256_cmp_ps(v, best, _CMP_GT_OQ) : _mm256_cmp_ps(v, best, _CMP_LT_OQ);
    const __m256 firstNaN = _mm256_and_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), _mm256_cmp_ps(best, best, _CMP_ORD_Q));
    const __m256 take = _mm256_or_ps(better, firstNaN);
    best = _mm256_blendv_ps(best, v, take);
    at = _mm256_blendv_ps(at, _mm256_castsi256_ps(_mm256_set1_epi32(int(k))), take);
  }
  const __m256i idx = _mm256_castps_si256(at);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(index), _mm256_cvtepi32_epi64(_mm256_castsi256_si128(idx)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(index + 4), _mm256_cvtepi32_epi64(_mm256_extracti128_si256(idx, 1)));
}

template <bool IsMax>
void firstExtremaOfRows(const float* data, int64_t b, int64_t e, int64_t n, int64_t* index) {
  int64_t r = b;
  if (n < kShortRow)
    for (; r + 8 <= e; r += 8) firstExtremaOfEightRows<IsMax>(data + r * n, n, index + r);
  for (; r < e; ++r) index[r] = firstExtremum<IsMax>(data + r * n, n);
}

#pragma GCC pop_options
#endif  // TSFUSE_ROW_EXTREMUM_AVX2

}  // namespace

bool firstExtremumValue(const float* data, int64_t n, bool isMax, float* value) {
#ifdef TSFUSE_ROW_EXTREMUM_AVX2
  if (!usingAvx2()) return false;
  *value = isMax ? firstExtremumValueOf<true>(data, n) : firstExtremumValueOf<false>(data, n);
  return true;
#else
  (void)data, (void)n, (void)isMax, (void)value;
  return false;
#endif
}

bool firstExtremumOfRows(const float* data, int64_t rows, int64_t n, bool isMax, int64_t* index) {
#ifdef TSFUSE_ROW_EXTREMUM_AVX2
  if (!usingAvx2()) return false;  // the op loops' choice: TSFUSE_CPU_ISA=baseline turns it off
  at::parallel_for(0, rows, std::max<int64_t>(8, 32768 / n), [&](int64_t b, int64_t e) {
    if (isMax)
      firstExtremaOfRows<true>(data, b, e, n, index);
    else
      firstExtremaOfRows<false>(data, b, e, n, index);
  });
  return true;
#else
  (void)data, (void)rows, (void)n, (void)isMax, (void)index;
  return false;
#endif
}

}  // namespace tsfuse::cpu
