// A call's bounded scratch copy (a packed operand). Move-only; empty when default-constructed.
//
// Small buffers, and all while another CPU allocator is installed, come from c10's allocator, so a
// fused call's allocations are one count. Large ones (kMappedBytes and up) are pages mapped alone
// (a kept heap block would pin malloc's heap top) and kept by the releasing thread (kCached of at
// most kCacheBytes), so a pack buffer faults in once per thread, not every call. Kept blocks are
// reported freed to c10's profiler hook.
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>
#include <vector>

namespace tsfuse::cpu {

class ScratchBuffer {
 public:
  static constexpr size_t kMappedBytes = size_t(64) << 10;
  static constexpr size_t kCacheBytes = size_t(4) << 20;
  static constexpr size_t kCached = 4;

  ScratchBuffer() = default;
  explicit ScratchBuffer(size_t bytes);
  ScratchBuffer(ScratchBuffer&& o) noexcept { *this = std::move(o); }
  ScratchBuffer& operator=(ScratchBuffer&& o) noexcept;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { release(); }

  char* data() const { return data_; }
  bool empty() const { return data_ == nullptr; }
  // Unmaps the blocks this thread keeps (tests start from an empty cache), and how many it kept.
  static size_t dropThreadCache();

 private:
  void release();

  char* data_ = nullptr;
  size_t mapped_ = 0;   // bytes of this buffer's own mapping; 0: from the allocator
  c10::DataPtr owned_;  // the allocator's block
};

// Scratch buffers by index, some empty. A copy has buffers of its own of the same sizes, not
// their contents: an object that keeps its packed operands here, copied for another thread, packs
// its own (jit::VerticalReduce, lines in parallel).
class ScratchSet {
 public:
  ScratchSet() = default;
  explicit ScratchSet(size_t n) : buffers_(n), bytes_(n, 0) {}
  ScratchSet(const ScratchSet& o) : ScratchSet(o.size()) {
    for (size_t i = 0; i < o.size(); ++i)
      if (o.bytes_[i] != 0) allocate(i, o.bytes_[i]);
  }
  ScratchSet& operator=(const ScratchSet& o) {
    if (this != &o) *this = ScratchSet(o);
    return *this;
  }
  ScratchSet(ScratchSet&&) noexcept = default;
  ScratchSet& operator=(ScratchSet&&) noexcept = default;

  void allocate(size_t i, size_t bytes) {
    buffers_[i] = ScratchBuffer(bytes);
    bytes_[i] = bytes;
  }
  const ScratchBuffer& operator[](size_t i) const { return buffers_[i]; }
  size_t size() const { return buffers_.size(); }

 private:
  std::vector<ScratchBuffer> buffers_;
  std::vector<size_t> bytes_;
};

}  // namespace tsfuse::cpu
