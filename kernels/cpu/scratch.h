// A call's bounded scratch copy (a packed operand) from c10's CPU allocator, like the call's
// tensors: what a fused call allocates is then one count, which bench/memprobe.cpp measures
// against the bound output + O(tile). Move-only; empty when default-constructed.
//
// Buffers are reused across calls: a released one of at most kCacheBytes stays with its thread
// (at most kCached of them) and serves the thread's next buffer that fits. A call's pack buffer
// (up to 1 MiB, jit::VerticalReduce::kMaxPackBytes) is then mapped, faulted in and zeroed by the
// kernel once per thread instead of once per call: where malloc maps every large block (a low
// mmap threshold, as bench/suite.py sets for its memory counts) that was 1.8 of the 3.3 ms of a
// k-means assignment over 100000 points. What stays resident between calls is bounded by
// kCached * kCacheBytes per thread that ran a fused call.
#pragma once

#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tsfuse::cpu {

class ScratchBuffer {
 public:
  static constexpr size_t kCacheBytes = size_t(4) << 20;
  static constexpr size_t kCached = 4;

  ScratchBuffer() = default;
  explicit ScratchBuffer(size_t bytes) : bytes_(bytes) {
    std::vector<Block>& cache = threadCache();
    auto best = cache.end();
    for (auto it = cache.begin(); it != cache.end(); ++it)
      if (it->capacity >= bytes && (best == cache.end() || it->capacity < best->capacity)) best = it;
    if (best != cache.end()) {
      block_ = std::move(*best);
      cache.erase(best);  // (a moved-from Block owns nothing)
    } else {
      block_ = Block{bytes, c10::GetCPUAllocator()->allocate(bytes)};
    }
  }
  // (A moved-from c10::DataPtr still returns its pointer: the source is reset, not just moved from,
  // so that it never returns that block to the cache.)
  ScratchBuffer(ScratchBuffer&& o) noexcept : bytes_(o.bytes_), block_(std::move(o.block_)) {
    o.bytes_ = 0;
    o.block_ = Block{};
  }
  ScratchBuffer& operator=(ScratchBuffer&& o) noexcept {
    if (this != &o) {
      release();
      bytes_ = o.bytes_;
      block_ = std::move(o.block_);
      o.bytes_ = 0;
      o.block_ = Block{};
    }
    return *this;
  }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { release(); }

  char* data() const { return static_cast<char*>(block_.data.get()); }
  bool empty() const { return bytes_ == 0; }
  // Frees the blocks this thread keeps (tests start from an empty cache), and how many it keeps.
  static void dropThreadCache() { threadCache().clear(); }
  static size_t threadCacheSize() { return threadCache().size(); }

 private:
  struct Block {
    size_t capacity = 0;
    c10::DataPtr data;
  };
  static std::vector<Block>& threadCache() {
    thread_local std::vector<Block> cache;
    return cache;
  }
  // Back to the thread's cache where it is small enough; the smallest cached block goes where
  // the cache is full.
  void release() {
    if (!block_.data || block_.capacity > kCacheBytes) return;
    std::vector<Block>& cache = threadCache();
    cache.push_back(std::move(block_));
    if (cache.size() > kCached)
      cache.erase(std::min_element(cache.begin(), cache.end(),
                                   [](const Block& a, const Block& b) { return a.capacity < b.capacity; }));
    block_ = Block{};
    bytes_ = 0;
  }

  size_t bytes_ = 0;
  Block block_;
};

}  // namespace tsfuse::cpu
