// The native CPU path's output allocation.
#include "kernels/cpu/drivers.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <cstdint>

namespace tsfuse::cpu {
namespace {

// Backs a large output with transparent huge pages before the tiles write it (THP in "madvise"
// mode, the common default): one page fault per 2 MiB instead of per 4 KiB. The huge pages are
// faulted in here, one thread, one byte each: measured on the seed intersection (57 MiB output,
// 2 threads), concurrent huge-page faults from the parallel tiles took 68 ms, this 16 ms (4 KiB
// pages: 28 ms). The output is written in full anyway, so resident memory is the same; only its
// 2 MiB-aligned interior is advised. A no-op where unsupported or refused.
void adviseHugePages(const at::Tensor& t) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  const size_t bytes = t.nbytes();
  if (bytes < 2 * kHuge) return;
  const auto begin = reinterpret_cast<uintptr_t>(t.data_ptr());
  const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1), last = (begin + bytes) & ~(kHuge - 1);
  if (last <= first || madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE) != 0) return;
  for (uintptr_t p = first; p < last; p += kHuge) *reinterpret_cast<volatile char*>(p) = 0;
#else
  (void)t;
#endif
}

}  // namespace

at::Tensor allocOutput(const Analysis& an) {
  if (an.donated.defined()) return an.allocOut(c10::kCPU);  // written over the donated operand
  at::Tensor out = ReusedOutput::allocate(an.outSizes, an.outStrides, at::TensorOptions().dtype(an.outDtype));
  adviseHugePages(out);  // it touches pages by writing to them
  return out;
}

}  // namespace tsfuse::cpu
