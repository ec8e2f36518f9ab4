// Gathering operand tiles from broadcast, arbitrarily strided tensors.
#pragma once

#include "kernels/plan/iteration.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tsfuse::cpu {

// Copies `run` elements `s` bytes apart from p to d. Runs of a few contiguous elements (an inner
// coordinate dim of 2-8) are copied inline: a memcpy call per run costs more than the copy.
template <typename U>
inline void copyRun(const char* p, int64_t s, int64_t run, U* d) {
  if (s == 0) {
    U v;
    std::memcpy(&v, p, sizeof(U));
    std::fill(d, d + run, v);
  } else if (s == static_cast<int64_t>(sizeof(U))) {
    if (run > 16) return static_cast<void>(std::memcpy(d, p, run * sizeof(U)));
    for (int64_t i = 0; i < run; ++i) std::memcpy(d + i, p + i * sizeof(U), sizeof(U));
  } else {
    for (int64_t i = 0; i < run; ++i) std::memcpy(d + i, p + i * s, sizeof(U));
  }
}

// Copies n elements of a sub-space into dst: the sub-space has dims `sizes`/`strides` (bytes),
// enumerated row-major from linear index `start`, rooted at `base`. Dims this walk reads as one
// (a stride that is the next dim's extent, or size 1) are merged first, so an operand contiguous
// across dims the space keeps apart (y[None] in an [N, M, 4] space) is copied in long runs.
template <typename U>
inline void gatherTyped(const char* base, const int64_t* sizes, const int64_t* strides, int nd, int64_t start,
                        int64_t n, U* dst) {
  int64_t size[kMaxDims], stride[kMaxDims];
  int m = 0;
  for (int j = 0; j < nd; ++j) {
    if (sizes[j] == 1) continue;
    if (m > 0 && stride[m - 1] == sizes[j] * strides[j]) {
      size[m - 1] *= sizes[j];
      stride[m - 1] = strides[j];
    } else {
      size[m] = sizes[j];
      stride[m++] = strides[j];
    }
  }
  if (m == 0) {
    copyRun(base, 0, n, dst);
    return;
  }
  if (m == 2 && stride[0] != 0) {
    // Rows of a short inner dim (wh1[:, None] over wh2's 9 anchors): one run per row, no carry.
    int64_t col = start % size[1];
    const char* row = base + start / size[1] * stride[0];
    for (int64_t done = 0; done < n; col = 0, row += stride[0]) {
      const int64_t run = std::min(size[1] - col, n - done);
      copyRun(row + col * stride[1], stride[1], run, dst + done);
      done += run;
    }
    return;
  }
  int64_t idx[kMaxDims];
  int64_t offset = 0;
  for (int j = m - 1; j >= 0; --j) {
    idx[j] = start % size[j];
    start /= size[j];
    offset += idx[j] * stride[j];
  }
  const int last = m - 1;
  int64_t done = 0;
  while (done < n) {
    const int64_t run = std::min(size[last] - idx[last], n - done);
    copyRun(base + offset, stride[last], run, dst + done);
    if (m > 1 && stride[last - 1] == 0 && idx[last] == 0 && run == size[last]) {
      // The dim above reads the same run again (x[:, None, :] over y's rows): copy what is
      // copied, doubling, as long as whole runs fit.
      const int64_t repeats = std::min(size[last - 1] - idx[last - 1], (n - done) / run);
      for (int64_t have = 1; have < repeats;) {
        const int64_t more = std::min(have, repeats - have);
        std::memcpy(dst + done + have * run, dst + done, more * run * sizeof(U));
        have += more;
      }
      done += (repeats - 1) * run;
      idx[last - 1] += repeats - 1;
    }
    done += run;
    idx[last] += run;
    offset += run * stride[last];
    for (int j = last; j > 0 && idx[j] == size[j]; --j) {
      offset -= idx[j] * stride[j];
      idx[j] = 0;
      ++idx[j - 1];
      offset += stride[j - 1];
    }
  }
}

// f(U{}) with U the unsigned integer of elemSize bytes (1, 2, 4 or 8): element copies whose size
// the compiler knows. Any other size raises.
template <typename F>
inline void withElementBits(int64_t elemSize, F&& f) {
  switch (elemSize) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    case 8:
      return f(uint64_t{});
    default:
      TORCH_CHECK(false, "tsfuse: unsupported element size ", elemSize);
  }
}

inline void gather(const char* base, int64_t elemSize, const int64_t* sizes, const int64_t* strides, int nd,
                   int64_t start, int64_t n, char* dst) {
  withElementBits(elemSize, [&](auto tag) {
    gatherTyped(base, sizes, strides, nd, start, n, reinterpret_cast<decltype(tag)*>(dst));
  });
}

// The first rows of float32 (a multiple of 8 of the n) moved as transposeRows moves them, in 8 x 8
// blocks through AVX registers: how many; 0 where the CPU lacks AVX2 (transpose_avx2.cpp).
int64_t transposeFloatRows8(const char* src, int64_t srcRow, int64_t n, int64_t cols, char* dst, int64_t dstRow);

// Element c of each of n source rows (`srcRow` bytes apart, each `cols` contiguous elements of
// `elemSize` bytes) to element `lane` of destination row c (`dstRow` bytes apart): the transpose
// a vertical reduction packs from row-major values reduced along their rows (x.pow(2).sum(1)).
// Source rows are read front to back, where the strided gather of one column at a time reads a
// cache line per element; float32 moves in 8 x 8 (AVX2) or 4 x 4 blocks through registers, bools
// in 8 x 8.
inline void transposeRows(const char* src, int64_t srcRow, int64_t n, int64_t cols, int64_t elemSize, char* dst,
                          int64_t dstRow) {
  int64_t l = elemSize == 4 ? transposeFloatRows8(src, srcRow, n, cols, dst, dstRow) : 0;
#if defined(__SSE2__)
  if (elemSize == 4) {
    for (; l + 4 <= n; l += 4) {
      const char* s = src + l * srcRow;
      char* d = dst + l * 4;
      int64_t c = 0;
      for (; c + 4 <= cols; c += 4) {
        __m128 r0 = _mm_loadu_ps(reinterpret_cast<const float*>(s + c * 4));
        __m128 r1 = _mm_loadu_ps(reinterpret_cast<const float*>(s + srcRow + c * 4));
        __m128 r2 = _mm_loadu_ps(reinterpret_cast<const float*>(s + 2 * srcRow + c * 4));
        __m128 r3 = _mm_loadu_ps(reinterpret_cast<const float*>(s + 3 * srcRow + c * 4));
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        _mm_storeu_ps(reinterpret_cast<float*>(d + c * dstRow), r0);
        _mm_storeu_ps(reinterpret_cast<float*>(d + (c + 1) * dstRow), r1);
        _mm_storeu_ps(reinterpret_cast<float*>(d + (c + 2) * dstRow), r2);
        _mm_storeu_ps(reinterpret_cast<float*>(d + (c + 3) * dstRow), r3);
      }
      for (; c < cols; ++c)
        for (int64_t k = 0; k < 4; ++k) std::memcpy(d + c * dstRow + k * 4, s + k * srcRow + c * 4, 4);
    }
  }
  if (elemSize == 1) {  // bools: 8 x 8 bytes, interleaved by bytes, pairs, then quads
    for (; l + 8 <= n; l += 8) {
      const char* s = src + l * srcRow;
      char* d = dst + l;
      int64_t c = 0;
      for (; c + 8 <= cols; c += 8) {
        __m128i r[8];
        for (int k = 0; k < 8; ++k) r[k] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + k * srcRow + c));
        const __m128i t0 = _mm_unpacklo_epi8(r[0], r[1]), t1 = _mm_unpacklo_epi8(r[2], r[3]);
        const __m128i t2 = _mm_unpacklo_epi8(r[4], r[5]), t3 = _mm_unpacklo_epi8(r[6], r[7]);
        const __m128i u0 = _mm_unpacklo_epi16(t0, t1), u1 = _mm_unpackhi_epi16(t0, t1);
        const __m128i u2 = _mm_unpacklo_epi16(t2, t3), u3 = _mm_unpackhi_epi16(t2, t3);
        const __m128i cols2[4] = {_mm_unpacklo_epi32(u0, u2), _mm_unpackhi_epi32(u0, u2), _mm_unpacklo_epi32(u1, u3),
                                  _mm_unpackhi_epi32(u1, u3)};
        for (int k = 0; k < 4; ++k) {
          _mm_storel_epi64(reinterpret_cast<__m128i*>(d + (c + 2 * k) * dstRow), cols2[k]);
          _mm_storel_epi64(reinterpret_cast<__m128i*>(d + (c + 2 * k + 1) * dstRow), _mm_srli_si128(cols2[k], 8));
        }
      }
      for (; c < cols; ++c)
        for (int64_t k = 0; k < 8; ++k) d[c * dstRow + k] = s[k * srcRow + c];
    }
  }
#endif
  withElementBits(elemSize, [&](auto tag) {
    using U = decltype(tag);
    for (; l < n; ++l)
      for (int64_t c = 0; c < cols; ++c)
        std::memcpy(dst + c * dstRow + l * sizeof(U), src + l * srcRow + c * sizeof(U), sizeof(U));
  });
}

// Copies n elements of operand o's walk of `space` (from linear index `start`, rooted at byte
// offset `base` of its data) into dst.
inline void gatherInto(const SubSpace& space, size_t o, const BroadcastView& v, int64_t base, int64_t start, int64_t n,
                       char* dst) {
  gather(v.data + base, v.elemSize, space.size.data(), space.stride[o].data(), static_cast<int>(space.size.size()),
         start, n, dst);
}

}  // namespace tsfuse::cpu
