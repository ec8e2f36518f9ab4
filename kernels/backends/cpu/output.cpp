// The native CPU path's output allocation.
//
// The tiles write the output once; on fresh pages that write also faults every 4 KiB page in,
// which can cost more than a short kernel. The allocator's block is kept where it will not fault
// on every call (reused, or heap); a block glibc mapped for this output alone is instead mapped as
// huge pages, faulted in by this thread before the tiles run. An installed allocator is honoured.
#include "kernels/backends/cpu/drivers.h"
#include "kernels/backends/cpu/native.h"
#include "kernels/backends/reused_output.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/strides.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#if __GLIBC_PREREQ(2, 33)
#define TSFUSE_HAVE_MALLINFO2 1
#endif
#endif

#include <algorithm>
#include <cstdint>

namespace tsfuse::cpu {
namespace {

constexpr size_t kHuge = size_t(2) << 20;

}  // namespace

size_t hugePageBytes(size_t bytes) {
  const size_t whole = bytes / kHuge * kHuge, tail = bytes - whole;
  // The last partial huge page too where the bytes it maps past the output are at most 1/16 of a
  // huge page, or of the output up to half a huge page: faulting that tail in 4 KiB pages on every
  // call can cost more than the kernel, for little memory left unused.
  const size_t allowed = std::max(kHuge / 16, std::min(bytes / 16, kHuge / 2));
  return tail != 0 && kHuge - tail <= allowed ? whole + kHuge : whole;
}

namespace {

#if defined(__linux__) && defined(MADV_HUGEPAGE)

constexpr size_t kPage = size_t(4) << 10;

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Whether the page in the middle of [p, p + bytes) is resident: a block the allocator reused has
// been written before; a fresh mapping has not.
bool residentMiddle(const void* p, size_t bytes) {
  const uintptr_t mid = (reinterpret_cast<uintptr_t>(p) + bytes / 2) & ~uintptr_t(kPage - 1);
  unsigned char v = 0;
  return mincore(reinterpret_cast<void*>(mid), kPage, &v) == 0 && (v & 1) != 0;
}

// Maps outputs on 2 MiB boundaries, huge-page backed (see the file comment). Reports to the same
// profiler hook as c10's default allocator, so profiles see the output as before.
class HugePageOutputAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const size_t huge = hugePageBytes(n);
    if (huge == 0) return c10::GetDefaultCPUAllocator()->allocate(n);
    const size_t len = std::max(roundUp(n, kPage), huge);
    // Over-map by one huge page, keep the aligned `len` bytes inside, unmap the rest.
    void* raw = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return c10::GetDefaultCPUAllocator()->allocate(n);
    const auto base = reinterpret_cast<uintptr_t>(raw), begin = roundUp(base, kHuge);
    if (begin > base) munmap(raw, begin - base);
    if (const uintptr_t end = base + len + kHuge; end > begin + len)
      munmap(reinterpret_cast<void*>(begin + len), end - begin - len);
    auto* p = reinterpret_cast<char*>(begin);
    // Refused where THP is off ("never"): the output is then ordinary 4 KiB pages, faulted by the tiles.
    if (madvise(p, huge, MADV_HUGEPAGE) == 0)
      for (size_t off = 0; off < huge; off += kHuge) *reinterpret_cast<volatile char*>(p + off) = 0;
    c10::profiledCPUMemoryReporter().New(p, n);
    return {p, new Mapping{p, len}, &release, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }  // the context is not the pointer
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }

 private:
  struct Mapping {  // the deleter is handed only the context
    void* data;
    size_t len;
  };
  static void release(void* ctx) {
    const auto* m = static_cast<const Mapping*>(ctx);
    c10::profiledCPUMemoryReporter().Delete(m->data);
    munmap(m->data, m->len);
    delete m;
  }
};

// The bytes glibc holds in blocks it mapped for themselves (mallinfo2's hblkhd); 0 elsewhere.
size_t mappedBlockBytes() {
#if defined(TSFUSE_HAVE_MALLINFO2)
  return mallinfo2().hblkhd;
#else
  return 0;  // then no block looks mapped for itself, and outputs stay where the allocator put them
#endif
}

HugePageOutputAllocator& hugePageAllocator() {
  static HugePageOutputAllocator allocator;
  return allocator;
}

#endif

}  // namespace

namespace {

at::Tensor allocOutput(c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::ScalarType dtype) {
  if (at::Tensor into = OutputInto::take(sizes, strides, dtype); into.defined()) return into;
  const auto options = at::TensorOptions().dtype(dtype);
  const size_t bytes = at::detail::computeStorageNbytes(sizes, strides, options.dtype().itemsize());
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // A thread-kept ReusedOutput buffer is resident after its first use; an installed allocator is honoured.
  if (hugePageBytes(bytes) != 0 && !ReusedOutput::active() && c10::GetCPUAllocator() == c10::GetDefaultCPUAllocator()) {
    const size_t mappedBefore = mappedBlockBytes();
    at::Tensor out = at::empty_strided(sizes, strides, options);
    // A block glibc mapped for this output alone, not yet touched: map it here instead (file comment).
    // A heap block, even a fresh one, stays: its pages are reused by later calls once written.
    if (mappedBlockBytes() < mappedBefore + bytes || residentMiddle(out.data_ptr(), bytes)) return out;
    out = at::Tensor();
    return at::detail::empty_strided_generic(sizes, strides, &hugePageAllocator(),
                                             c10::DispatchKeySet(c10::DispatchKey::CPU), dtype);
  }
#endif
  return ReusedOutput::allocate(sizes, strides, options);
}

}  // namespace

at::Tensor allocOutput(const Analysis& an) {
  if (an.donated.defined()) return an.allocOut(c10::kCPU);  // written over the donated operand
  return allocOutput(an.outSizes, an.outStrides, an.outDtype);
}

at::Tensor allocDenseOutput(c10::IntArrayRef sizes, c10::ScalarType dtype) {
  return allocOutput(sizes, c10::contiguous_strides(sizes), dtype);
}

}  // namespace tsfuse::cpu
