// Gathering operand tiles from broadcast, arbitrarily strided tensors.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace tsfuse::cpu {

constexpr int kMaxDims = 25;  // ATen's own limit for TensorIterator

// An operand seen through the broadcast shape: byte strides per dim of that shape (0 where the
// operand is broadcast).
struct BroadcastView {
  const char* data = nullptr;
  int64_t elemSize = 0;
  std::vector<int64_t> stride;

  BroadcastView() = default;
  BroadcastView(const at::Tensor& t, at::IntArrayRef shape) : data(static_cast<const char*>(t.const_data_ptr())), elemSize(t.element_size()) {
    const int64_t R = static_cast<int64_t>(shape.size()), r = t.dim();
    stride.assign(R, 0);
    for (int64_t d = 0; d < r; ++d) {
      int64_t D = R - r + d;
      stride[D] = (t.size(d) == 1) ? 0 : t.stride(d) * elemSize;
    }
  }
};

// Copies n elements of a sub-space into dst: the sub-space has dims `sizes`/`strides` (bytes),
// enumerated row-major from linear index `start`, rooted at `base`.
template <typename U>
inline void gatherTyped(const char* base, const int64_t* sizes, const int64_t* strides, int nd,
                        int64_t start, int64_t n, U* dst) {
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

inline void gather(const char* base, int64_t elemSize, const int64_t* sizes, const int64_t* strides,
                   int nd, int64_t start, int64_t n, char* dst) {
  switch (elemSize) {
    case 1: return gatherTyped(base, sizes, strides, nd, start, n, reinterpret_cast<uint8_t*>(dst));
    case 2: return gatherTyped(base, sizes, strides, nd, start, n, reinterpret_cast<uint16_t*>(dst));
    case 4: return gatherTyped(base, sizes, strides, nd, start, n, reinterpret_cast<uint32_t*>(dst));
    case 8: return gatherTyped(base, sizes, strides, nd, start, n, reinterpret_cast<uint64_t*>(dst));
    default: TORCH_CHECK(false, "tsfuse: unsupported element size ", elemSize);
  }
}

// A list of dims of the broadcast shape, with each operand's strides along them.
struct SubSpace {
  std::vector<int64_t> size;
  std::vector<std::vector<int64_t>> stride;  // [operand][dim], bytes
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : size) n *= s;
    return n;
  }
  static SubSpace select(const std::vector<BroadcastView>& views, at::IntArrayRef shape,
                         const std::vector<int64_t>& dims) {
    SubSpace s;
    s.stride.resize(views.size());
    for (int64_t d : dims) {
      s.size.push_back(shape[d]);
      for (size_t o = 0; o < views.size(); ++o) s.stride[o].push_back(views[o].stride[d]);
    }
    return s;
  }
  // Merges neighbouring dims that every operand walks as one (outer stride == inner stride * size).
  void coalesce() {
    for (size_t j = 0; j + 1 < size.size();) {
      bool mergeable = true;
      for (const auto& st : stride) mergeable &= st[j] == st[j + 1] * size[j + 1];
      if (!mergeable) {
        ++j;
        continue;
      }
      size[j] *= size[j + 1];
      size.erase(size.begin() + j + 1);
      for (auto& st : stride) {
        st[j] = st[j + 1];
        st.erase(st.begin() + j + 1);
      }
    }
  }
  // Whether operand o has no stride here: one element for the whole sub-space.
  bool constantFor(size_t o) const {
    return std::all_of(stride[o].begin(), stride[o].end(), [](int64_t x) { return x == 0; });
  }
  // Byte offset of linear index `lin` (row-major) for operand o.
  int64_t offset(size_t o, int64_t lin) const {
    int64_t off = 0;
    for (int j = static_cast<int>(size.size()) - 1; j >= 0; --j) {
      off += (lin % size[j]) * stride[o][j];
      lin /= size[j];
    }
    return off;
  }
  void gatherInto(size_t o, const BroadcastView& v, int64_t base, int64_t start, int64_t n, char* dst) const {
    gather(v.data + base, v.elemSize, size.data(), stride[o].data(), static_cast<int>(size.size()),
           start, n, dst);
  }
};

}  // namespace tsfuse::cpu
