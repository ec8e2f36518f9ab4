// A call's bounded scratch copy (a packed operand) from c10's CPU allocator, like the call's
// tensors: what a fused call allocates is then one count, which bench/memprobe.cpp measures
// against the bound output + O(tile). Move-only; empty when default-constructed.
#pragma once

#include <c10/core/CPUAllocator.h>

#include <cstddef>

namespace tsfuse::cpu {

class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  explicit ScratchBuffer(size_t bytes) : bytes_(bytes), data_(c10::GetCPUAllocator()->allocate(bytes)) {}
  char* data() const { return static_cast<char*>(data_.get()); }
  bool empty() const { return bytes_ == 0; }

 private:
  size_t bytes_ = 0;
  c10::DataPtr data_;
};

}  // namespace tsfuse::cpu
