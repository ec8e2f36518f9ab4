// Where a fused op's CPU output lives (kernels/backends/cpu/output.cpp): fresh pages of a large output are
// mapped by tsfuse on 2 MiB boundaries (huge pages where the kernel allows them); an installed CPU
// allocator and small outputs keep c10's allocation. Values and tensor behaviour are unchanged.
#include "test_util.h"

#include "kernels/backends/cpu/drivers.h"

#include <c10/core/CPUAllocator.h>

#include <malloc.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace ops_output_memory_test {

namespace {

using tsfuse_test::callBoxed;
using tsfuse_test::sameTensor;

const std::string kAbsDiff = "v1: sub($0, $1); abs(%0); mul(%1, 3)";
constexpr uintptr_t kHuge = uintptr_t(2) << 20;

at::Tensor absDiff(const at::Tensor& a, const at::Tensor& b) {
  return callBoxed("tsfuse::pairwise", std::vector<at::Tensor>{a, b}, kAbsDiff, std::vector<int64_t>{});
}

int64_t residentKiB() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

// Holds, while alive, every free heap chunk that could serve `bytes`: glibc serves a large block
// from such a chunk (left by earlier tests below a block still in use, and kept because its trim
// threshold grows with its mmap threshold) before it maps one, whatever the threshold. While one
// is alive, a block of `bytes` is a fresh mapping.
class HeapRoomHeld {
 public:
  explicit HeapRoomHeld(size_t bytes) {
    for (;;) {
      const size_t mapped = mallinfo2().hblkhd;
      void* p = std::malloc(bytes);
      const bool fresh = mallinfo2().hblkhd > mapped;
      if (fresh || p == nullptr) {
        std::free(p);
        return;
      }
      held_.push_back(p);
    }
  }
  ~HeapRoomHeld() {
    for (void* p : held_) std::free(p);
  }

 private:
  std::vector<void*> held_;
};

}  // namespace

// 40 MiB: past glibc's largest dynamic mmap threshold (32 MiB), so c10's block is a fresh mapping
// once no free heap chunk can serve it (HeapRoomHeld).
TEST(OutputMemory, AFreshLargeOutputIsMappedOnHugePageBoundaries) {
  tsfuse_test::Gen g(3);
  const at::Tensor a = g.tensor({2560, 1}, at::kFloat), b = g.tensor({1, 4096}, at::kFloat);
  const at::Tensor want = at::abs(a - b) * 3;
  const HeapRoomHeld room(2560 * 4096 * sizeof(float));
  const int64_t before = residentKiB();
  at::Tensor out = absDiff(a, b);
  const int64_t grown = residentKiB() - before;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(out.data_ptr()) % kHuge, 0u);
  EXPECT_NE(out.storage().allocator(), c10::GetDefaultCPUAllocator());
  EXPECT_TRUE(sameTensor(want, out, true));
  // Resident: the output, not the mapping's alignment slack (a margin for the call's own scratch).
  EXPECT_LE(grown, static_cast<int64_t>(out.nbytes() / 1024) + 4096) << "KiB";

  // Still an ordinary resizable tensor: growing it keeps the values.
  out.resize_({2560 * 4096 + 1000});
  EXPECT_TRUE(sameTensor(want.flatten(), out.narrow(0, 0, 2560 * 4096), true));
  // The tensor's memory goes back to the system with the tensor.
  void* mapped = out.data_ptr();
  EXPECT_NE(out.storage().allocator(), c10::GetDefaultCPUAllocator());  // resized by the same allocator
  out = at::Tensor();
  unsigned char resident = 0;
  EXPECT_EQ(mincore(mapped, 4096, &resident), -1);
  EXPECT_EQ(errno, ENOMEM);
}

// Huge pages back whole 2 MiB and a last partial one at least 15/16 used, or (larger outputs) one
// that maps at most 1/16 of the output more, up to half a huge page; nothing below that.
TEST(OutputMemory, HugePagesOnlyWhereAtMostOneSixteenthIsWasted) {
  using tsfuse::cpu::hugePageBytes;
  constexpr size_t kMiB = size_t(1) << 20;
  EXPECT_EQ(hugePageBytes(0), 0u);
  EXPECT_EQ(hugePageBytes(1024 * 500 * 4), 2 * kMiB);      // 1.95 MiB: one huge page
  EXPECT_EQ(hugePageBytes(2 * kMiB * 15 / 16), 2 * kMiB);  // exactly 15/16 used
  EXPECT_EQ(hugePageBytes(2 * kMiB * 15 / 16 - 1), 0u);    // just below: none
  EXPECT_EQ(hugePageBytes(100 * 4096 * 4), 0u);            // 1.56 MiB
  EXPECT_EQ(hugePageBytes(40 * kMiB), 40 * kMiB);
  EXPECT_EQ(hugePageBytes(40 * kMiB + 4000), 40 * kMiB);  // the tail is 4 KiB pages
  EXPECT_EQ(hugePageBytes(42 * kMiB - 4000), 42 * kMiB);
  EXPECT_EQ(hugePageBytes(1000 * 1000 * 4), 4 * kMiB);  // 190 KiB past it: 1/21 of the output
  EXPECT_EQ(hugePageBytes(4096 * 500 * 4), 8 * kMiB);
  EXPECT_EQ(hugePageBytes(3 * kMiB + 256 * 1024), 2 * kMiB);  // 768 KiB past it: 1/4
  EXPECT_EQ(hugePageBytes(40 * kMiB + kMiB), 42 * kMiB);      // 1 MiB past it: half a page
  EXPECT_EQ(hugePageBytes(40 * kMiB + kMiB - 1), 40 * kMiB);  // more than half
}

// Below 15/16 of a huge page the output keeps c10's allocation, whichever block glibc gave it.
TEST(OutputMemory, ASmallOutputStaysWithTheAllocator) {
  tsfuse_test::Gen g(4);
  const at::Tensor a = g.tensor({100, 1}, at::kFloat), b = g.tensor({1, 4096}, at::kFloat);  // 1.56 MiB
  at::Tensor out = absDiff(a, b);
  EXPECT_EQ(out.storage().allocator(), c10::GetDefaultCPUAllocator());
  EXPECT_TRUE(sameTensor(at::abs(a - b) * 3, out, true));
}

// A process that installs its own CPU allocator (a memory profiler, bench/memprobe.cpp) gets every
// output from it, large ones included.
TEST(OutputMemory, AnInstalledAllocatorIsHonoured) {
  tsfuse_test::Gen g(5);
  const at::Tensor a = g.tensor({2560, 1}, at::kFloat), b = g.tensor({1, 4096}, at::kFloat);
  static tsfuse_test::CountingAllocator counting;
  c10::Allocator* previous = c10::GetCPUAllocator();
  c10::SetCPUAllocator(&counting, /*priority=*/UINT8_MAX);  // (>= every earlier test's)
  at::Tensor out = absDiff(a, b);
  c10::SetCPUAllocator(previous, /*priority=*/UINT8_MAX);
  EXPECT_EQ(out.storage().allocator(), &counting);
  EXPECT_GE(counting.blocks, 1);
  EXPECT_TRUE(sameTensor(at::abs(a - b) * 3, out, true));
}

}  // namespace ops_output_memory_test
