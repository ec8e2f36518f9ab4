// ReusedOutput: lets the pieces of one call (a chain's or sweep's slabs) share output memory, one
// buffer kept per thread.
#pragma once

#include <ATen/ATen.h>

namespace tsfuse {

// While a ReusedOutput is alive on a thread, the native CPU path puts its output in the thread's
// kept buffer when nothing else holds that buffer any more (the previous piece's value has been
// reduced and dropped) and it is large enough, and otherwise keeps its new output as the buffer
// (unless the buffer is still in use and no smaller: a chain's fused later stage reads its piece's
// stage-0 value from it). Each thread keeps that one buffer between calls (at most a chain slab:
// kSlabElements / 2 elements by default), so a model's steady-state calls allocate no slab memory
// at all. Without it, an allocator that maps every large block afresh (glibc with a fixed mmap
// threshold) faults each slab's pages in again every call.
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

// While an OutputInto is alive on a thread, the native CPU path's next output of exactly
// target's sizes, strides and dtype is target itself, taken once: a slab of a larger output that a
// call of the slab writes in place (mapInHoistedSlabs). Any other output is allocated as usual.
class OutputInto {
 public:
  explicit OutputInto(at::Tensor target);
  ~OutputInto();
  OutputInto(const OutputInto&) = delete;
  OutputInto& operator=(const OutputInto&) = delete;
  // target, if one is waiting on this thread and matches; else an undefined tensor.
  static at::Tensor take(at::IntArrayRef sizes, at::IntArrayRef strides, c10::ScalarType dtype);

 private:
  at::Tensor previous_;
};

}  // namespace tsfuse
