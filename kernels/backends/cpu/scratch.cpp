// Scratch buffers: allocator blocks, or mapped blocks kept per thread (kernels/backends/cpu/scratch.h).
#include "kernels/backends/cpu/scratch.h"

#include <c10/core/CPUAllocator.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <algorithm>
#include <utility>

namespace tsfuse::cpu {
namespace {

#if defined(__linux__)
constexpr bool kCanMap = true;
#else
constexpr bool kCanMap = false;
#endif

constexpr size_t kPage = size_t(4) << 10;

struct Mapped {
  char* data;
  size_t bytes;
};

void unmap(const Mapped& m) {
#if defined(__linux__)
  munmap(m.data, m.bytes);
#endif
}

// Whether this thread's cache has been destroyed (the thread is exiting): a buffer released after
// that (one held by a static object) is unmapped at once. Trivially destructible, so still readable.
thread_local bool tlsCacheGone = false;

// The blocks a thread keeps, unmapped when it exits. A fixed array, not a heap vector: a kept heap
// block, however small, may pin the top of malloc's heap (scratch.h).
struct ThreadCache {
  Mapped blocks[ScratchBuffer::kCached];
  size_t count = 0;
  ~ThreadCache() {
    drop();
    tlsCacheGone = true;
  }
  size_t drop() {
    for (size_t i = 0; i < count; ++i) unmap(blocks[i]);
    return std::exchange(count, 0);
  }
  // The smallest kept block of at least `bytes`, taken out of the cache; {nullptr, 0} if none.
  Mapped take(size_t bytes) {
    size_t best = count;
    for (size_t i = 0; i < count; ++i)
      if (blocks[i].bytes >= bytes && (best == count || blocks[i].bytes < blocks[best].bytes)) best = i;
    if (best == count) return {nullptr, 0};
    const Mapped m = blocks[best];
    blocks[best] = blocks[--count];
    return m;
  }
  // Keeps m; where the cache is full, the smallest of the kept blocks and m is unmapped.
  void keep(Mapped m) {
    if (count < ScratchBuffer::kCached) {
      blocks[count++] = m;
      return;
    }
    Mapped* smallest =
        std::min_element(blocks, blocks + count, [](const Mapped& a, const Mapped& b) { return a.bytes < b.bytes; });
    if (smallest->bytes < m.bytes) std::swap(*smallest, m);
    unmap(m);
  }
};

ThreadCache& threadCache() {
  thread_local ThreadCache cache;
  return cache;
}

}  // namespace

ScratchBuffer::ScratchBuffer(size_t bytes) {
  if (bytes == 0) return;
  auto fromAllocator = [&] {
    owned_ = c10::GetCPUAllocator()->allocate(bytes);
    data_ = static_cast<char*>(owned_.get());
  };
  if (!kCanMap || bytes < kMappedBytes || tlsCacheGone || c10::GetCPUAllocator() != c10::GetDefaultCPUAllocator()) {
    fromAllocator();
    return;
  }
  if (const Mapped m = threadCache().take(bytes); m.data != nullptr) {
    data_ = m.data;
    mapped_ = m.bytes;
  } else {
#if defined(__linux__)
    const size_t len = (bytes + kPage - 1) / kPage * kPage;
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {  // the allocator's error (c10's out-of-memory message) where it fails too
      fromAllocator();
      return;
    }
    data_ = static_cast<char*>(p);
    mapped_ = len;
#endif
  }
  c10::profiledCPUMemoryReporter().New(data_, mapped_);
}

ScratchBuffer& ScratchBuffer::operator=(ScratchBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    mapped_ = std::exchange(o.mapped_, 0);
    owned_ = std::move(o.owned_);
    o.owned_.clear();  // (a moved-from DataPtr may still hold its pointer)
  }
  return *this;
}

// A mapped block goes back to the releasing thread's cache where it is small enough; the smallest
// kept block is unmapped where the cache is full.
void ScratchBuffer::release() {
  if (mapped_ != 0) {
    c10::profiledCPUMemoryReporter().Delete(data_);
    const Mapped m{data_, mapped_};
    if (m.bytes > kCacheBytes || tlsCacheGone)
      unmap(m);
    else
      threadCache().keep(m);
  }
  owned_.clear();
  data_ = nullptr;
  mapped_ = 0;
}

size_t ScratchBuffer::dropThreadCache() { return threadCache().drop(); }

}  // namespace tsfuse::cpu
