// transposeFloatRows8 (gather.h): 8 x 8 float32 transposes in AVX registers.
#include "kernels/backends/cpu/gather.h"

#include "kernels/backends/cpu/tile_program.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TSFUSE_TRANSPOSE_AVX2 1
#endif

namespace tsfuse::cpu {

#ifdef TSFUSE_TRANSPOSE_AVX2
#pragma GCC push_options
#pragma GCC target("avx2")  // run only where the CPU has it (usingAvx2)

namespace {

// Rows r[0..8) of eight floats each become their eight columns: pairs interleaved, then quads,
// then the 128-bit halves exchanged.
void transpose8(const char* s, int64_t srcRow, char* d, int64_t dstRow) {
  __m256 r[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(reinterpret_cast<const float*>(s + k * srcRow));
  __m256 t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 2; ++k) {
      u[4 * h + 2 * k] = _mm256_shuffle_ps(t[4 * h + k], t[4 * h + k + 2], _MM_SHUFFLE(1, 0, 1, 0));
      u[4 * h + 2 * k + 1] = _mm256_shuffle_ps(t[4 * h + k], t[4 * h + k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(reinterpret_cast<float*>(d + j * dstRow), _mm256_permute2f128_ps(u[j], u[j + 4], 0x20));
    _mm256_storeu_ps(reinterpret_cast<float*>(d + (j + 4) * dstRow), _mm256_permute2f128_ps(u[j], u[j + 4], 0x31));
  }
}

}  // namespace

int64_t transposeFloatRows8(const char* src, int64_t srcRow, int64_t n, int64_t cols, char* dst, int64_t dstRow) {
  if (!usingAvx2()) return 0;
  int64_t l = 0;
  for (; l + 8 <= n; l += 8) {
    const char* s = src + l * srcRow;
    char* d = dst + l * 4;
    int64_t c = 0;
    for (; c + 8 <= cols; c += 8) transpose8(s + c * 4, srcRow, d + c * dstRow, dstRow);
    for (; c < cols; ++c)
      for (int64_t k = 0; k < 8; ++k) std::memcpy(d + c * dstRow + k * 4, s + k * srcRow + c * 4, 4);
  }
  return l;
}

#pragma GCC pop_options
#else

int64_t transposeFloatRows8(const char*, int64_t, int64_t, int64_t, char*, int64_t) { return 0; }

#endif  // TSFUSE_TRANSPOSE_AVX2

}  // namespace tsfuse::cpu
