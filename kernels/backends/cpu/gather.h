// Gathering operand tiles from broadcast, arbitrarily strided tensors.
#pragma once

#include "kernels/plan/iteration.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace tsfuse::cpu {

// Copies n elements of a sub-space into dst: the sub-space has dims `sizes`/`strides` (bytes),
// enumerated row-major from linear index `start`, rooted at `base`.
template <typename U>
inline void gatherTyped(const char* base, const int64_t* sizes, const int64_t* strides, int nd, int64_t start,
                        int64_t n, U* dst) {
  if (nd == 0) {
    U v;
    std::memcpy(&v, base, sizeof(U));
    std::fill(dst, dst + n, v);
    return;
  }
  int64_t idx[kMaxDims];
  int64_t offset = 0;
  for (int j = nd - 1; j >= 0; --j) {
    idx[j] = start % sizes[j];
    start /= sizes[j];
    offset += idx[j] * strides[j];
  }
  const int last = nd - 1;
  int64_t done = 0;
  while (done < n) {
    const int64_t run = std::min(sizes[last] - idx[last], n - done);
    const char* p = base + offset;
    const int64_t s = strides[last];
    U* d = dst + done;
    if (s == 0) {
      U v;
      std::memcpy(&v, p, sizeof(U));
      std::fill(d, d + run, v);
    } else if (s == static_cast<int64_t>(sizeof(U))) {
      std::memcpy(d, p, run * sizeof(U));
    } else {
      for (int64_t i = 0; i < run; ++i) std::memcpy(d + i, p + i * s, sizeof(U));
    }
    done += run;
    idx[last] += run;
    offset += run * s;
    for (int j = last; j > 0 && idx[j] == sizes[j]; --j) {
      offset -= idx[j] * strides[j];
      idx[j] = 0;
      ++idx[j - 1];
      offset += strides[j - 1];
    }
  }
}

inline void gather(const char* base, int64_t elemSize, const int64_t* sizes, const int64_t* strides, int nd,
                   int64_t start, int64_t n, char* dst) {
  switch (elemSize) {
    case 1:
      return gatherTyped(base, sizes, strides, nd, start, n, reinterpret_cast<uint8_t*>(dst));
    case 2:
      return gatherTyped(base, sizes, strides, nd, start, n, reinterpret_cast<uint16_t*>(dst));
    case 4:
      return gatherTyped(base, sizes, strides, nd, start, n, reinterpret_cast<uint32_t*>(dst));
    case 8:
      return gatherTyped(base, sizes, strides, nd, start, n, reinterpret_cast<uint64_t*>(dst));
    default:
      TORCH_CHECK(false, "tsfuse: unsupported element size ", elemSize);
  }
}

// Copies n elements of operand o's walk of `space` (from linear index `start`, rooted at byte
// offset `base` of its data) into dst.
inline void gatherInto(const SubSpace& space, size_t o, const BroadcastView& v, int64_t base, int64_t start, int64_t n,
                       char* dst) {
  gather(v.data + base, v.elemSize, space.size.data(), space.stride[o].data(), static_cast<int>(space.size.size()),
         start, n, dst);
}

}  // namespace tsfuse::cpu
