// Slabs: the element budget an intermediate of one slab of a call's space may hold, and the
// operands narrowed to one slab (the chunked path, chains, sweeps and softmax cut calls this way).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace tsfuse {

// An intermediate of at most this many elements costs no more than O(tile) scratch to store: the
// chunked path's slab budget (and the size up to which softmax stores its value).
constexpr int64_t kSlabElements = int64_t(1) << 18;
// On a GPU each ATen launch on a slab costs far more than streaming the slab itself, so slabs
// there are this many times larger: 16 MiB of float32 per intermediate, still a constant.
constexpr int64_t kDeviceSlabScale = 16;
// The slab budget for intermediates on `device`, from its CPU size.
inline int64_t slabElements(c10::Device device, int64_t cpuElements = kSlabElements) {
  return device.is_cpu() ? cpuElements : cpuElements * kDeviceSlabScale;
}

// Each tensor narrowed to [start, start + len) along `dim` of a space of rank `rank` (tensors align
// to its trailing dims) where it is not broadcast there, so 0-dim operands stay 0-dim and type
// promotion is unchanged: an operand list for one slab of the space.
std::vector<at::Tensor> narrowOperands(at::TensorList ts, int64_t rank, int64_t dim, int64_t start, int64_t len);

}  // namespace tsfuse
