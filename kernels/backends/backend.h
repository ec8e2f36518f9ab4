// What every backend of the fused ops shares: the shape of a native path, the exact chunked ATen
// path, the reference evaluation, and the record of which path a call took. Backends (kernels/backends/cpu,
// kernels/backends/cuda, kernels/backends/chunked/chunked.cpp) include this; the routine that picks among them is
// kernels/runtime/fused_call.h, one layer up.
#pragma once

#include "kernels/reference/analysis.h"
#include "kernels/plan/iteration.h"

#include <functional>

namespace tsfuse {

// The op's outputs: one tensor, or (values, indices) for max/min with indices.
using Outputs = std::vector<at::Tensor>;

// Returns no outputs (and the reason in *why) when it declines.
using NativePath = std::function<Outputs(const Expr&, at::TensorList, const ReduceSpec*,
                                         const Analysis&, const IterationPlan&, std::string* why)>;

// Throws c10::Error unless n is the number of operands of the expression and then of the
// reduction's epilogue (its $1, $2, ...).
void checkFusedOperandCount(const Expr& e, const ReduceSpec* reduce, size_t n);

// Unfused evaluation with ATen ops, without recording a path (the reference: the chunked path's
// single slab, Meta, autograd and error paths). Checks the operand count first.
Outputs evalFused(const Expr& e, at::TensorList operands, const ReduceSpec* reduce);
// The reduction (and epilogue) of evalFused, with ATen, over an already computed value.
Outputs reduceWithAten(const Expr& e, at::TensorList operands, const ReduceSpec& reduce, at::Tensor value);

// An intermediate of at most this many elements costs no more than O(tile) scratch to store: the
// chunked path's slab budget (and the size up to which softmax stores its value).
constexpr int64_t kSlabElements = int64_t(1) << 18;
// On a GPU a slab of kSlabElements streams in well under a microsecond, far less than the few
// microseconds each of its ATen launches costs (measured on an H200: the chunked IoU at 16x the
// launches of eager ran 16x slower). Slabs there are this many times larger: 16 MiB of float32 per
// intermediate, still a constant.
constexpr int64_t kDeviceSlabScale = 16;
// The slab budget for intermediates on `device`, from its CPU size.
inline int64_t slabElements(c10::Device device, int64_t cpuElements = kSlabElements) {
  return device.is_cpu() ? cpuElements : cpuElements * kDeviceSlabScale;
}

// The exact, device-generic path: evaluates the expression with ATen on slabs of the output whose
// intermediates stay below kSlabElements, writing each slab into the output.
Outputs runChunked(const Expr& e, at::TensorList operands, const ReduceSpec* reduce,
                   const Analysis& an, const IterationPlan& plan);

// A caller that runs a fused op on many pieces of one call (a chain's or sweep's slabs) lets the
// pieces share output memory: while a ReusedOutput is alive on a thread, the native CPU path puts
// its output in the thread's kept buffer when nothing else holds that buffer any more (the
// previous piece's value has been reduced and dropped) and it is large enough, and otherwise
// keeps its new output as the buffer (unless the buffer is still in use and no smaller: a chain's
// fused later stage reads its piece's stage-0 value from it). Each thread keeps that one buffer between calls (at most
// a chain slab: kSlabElements / 2 elements by default), so a model's steady-state calls allocate
// no slab memory at all. Without it, an allocator that maps every large block afresh (glibc with
// a fixed mmap threshold, as bench/suite.py runs) faults each slab's pages in again every call.
class ReusedOutput {
 public:
  ReusedOutput();
  ~ReusedOutput();
  ReusedOutput(const ReusedOutput&) = delete;
  ReusedOutput& operator=(const ReusedOutput&) = delete;
  // An output of these sizes, strides and options: in the thread's buffer where a ReusedOutput is
  // alive on this thread, else freshly allocated.
  static at::Tensor allocate(at::IntArrayRef sizes, at::IntArrayRef strides, const at::TensorOptions& options);
  // Whether one is alive on this thread.
  static bool active();
};

// Each tensor narrowed to [start, start + len) along `dim` of a space of rank `rank` (tensors align
// to its trailing dims) where it is not broadcast there, so 0-dim operands stay 0-dim and type
// promotion is unchanged: an operand list for one slab of the space.
std::vector<at::Tensor> narrowOperands(at::TensorList ts, int64_t rank, int64_t dim, int64_t start, int64_t len);

// Records the path of the current call on this thread (tsfuse::lastPath(), include/tsfuse/ops.h).
void setLastPath(const char* path);

// The device of the operands, ignoring 0-dim CPU tensors (which eager lets mix with any device);
// nullopt when the operands mix devices otherwise.
std::optional<c10::Device> commonDevice(at::TensorList operands);
c10::Device mainDevice(at::TensorList operands);

}  // namespace tsfuse
