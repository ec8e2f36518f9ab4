// Where a fused op's CPU output lives (kernels/cpu/output.cpp): fresh pages of a large output are
// mapped by tsfuse on 2 MiB boundaries (huge pages where the kernel allows them); an installed CPU
// allocator and small outputs keep c10's allocation. Values and tensor behaviour are unchanged.
#include "test_util.h"

#include "kernels/cpu/drivers.h"

#include <c10/core/CPUAllocator.h>

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <string>

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

// Counts what it allocates, through c10's default allocator (as a memory profiler would).
struct CountingAllocator final : c10::Allocator {
  int64_t blocks = 0;
  c10::DataPtr allocate(size_t n) override {
    ++blocks;
    return c10::GetDefaultCPUAllocator()->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return c10::GetDefaultCPUAllocator()->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
};

}  // namespace

// 40 MiB: past glibc's largest dynamic mmap threshold (32 MiB), so c10's block is always a fresh
// mapping, whatever the process allocated before.
TEST(OutputMemory, AFreshLargeOutputIsMappedOnHugePageBoundaries) {
  tsfuse_test::Gen g(3);
  const at::Tensor a = g.tensor({2560, 1}, at::kFloat), b = g.tensor({1, 4096}, at::kFloat);
  const at::Tensor want = at::abs(a - b) * 3;
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

// Huge pages back whole 2 MiB and a last partial one at least 15/16 used; nothing below that.
TEST(OutputMemory, HugePagesOnlyWhereAtMostOneSixteenthIsWasted) {
  using tsfuse::cpu::hugePageBytes;
  constexpr size_t kMiB = size_t(1) << 20;
  EXPECT_EQ(hugePageBytes(0), 0u);
  EXPECT_EQ(hugePageBytes(1024 * 500 * 4), 2 * kMiB);         // 1.95 MiB: one huge page
  EXPECT_EQ(hugePageBytes(2 * kMiB * 15 / 16), 2 * kMiB);     // exactly 15/16 used
  EXPECT_EQ(hugePageBytes(2 * kMiB * 15 / 16 - 1), 0u);       // just below: none
  EXPECT_EQ(hugePageBytes(100 * 4096 * 4), 0u);               // 1.56 MiB
  EXPECT_EQ(hugePageBytes(40 * kMiB), 40 * kMiB);
  EXPECT_EQ(hugePageBytes(40 * kMiB + 4000), 40 * kMiB);      // the tail is 4 KiB pages
  EXPECT_EQ(hugePageBytes(42 * kMiB - 4000), 42 * kMiB);
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
  static CountingAllocator counting;
  c10::Allocator* previous = c10::GetCPUAllocator();
  c10::SetCPUAllocator(&counting, /*priority=*/100);
  at::Tensor out = absDiff(a, b);
  c10::SetCPUAllocator(previous, /*priority=*/101);
  EXPECT_EQ(out.storage().allocator(), &counting);
  EXPECT_GE(counting.blocks, 1);
  EXPECT_TRUE(sameTensor(at::abs(a - b) * 3, out, true));
}

}  // namespace ops_output_memory_test
