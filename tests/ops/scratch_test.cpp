// Scratch buffers (kernels/backends/cpu/scratch.h): a released large buffer serves the thread's next one
// that fits, small ones and every one under an installed allocator come from the allocator, live
// buffers never share memory (moves included), and what a thread keeps is bounded and its own.
#include "test_util.h"

#include "kernels/backends/cpu/scratch.h"

#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

namespace ops_scratch_test {

namespace {

using tsfuse::cpu::ScratchBuffer;

constexpr size_t kLarge = ScratchBuffer::kMappedBytes;

TEST(ScratchBuffer, AReleasedLargeBufferServesTheNextThatFits) {
  ScratchBuffer::dropThreadCache();
  const char* first;
  {
    ScratchBuffer a(4 * kLarge);
    first = a.data();
    a.data()[4 * kLarge - 1] = 1;  // writable to its last byte
  }
  ScratchBuffer b(2 * kLarge);  // smaller: the same block
  EXPECT_EQ(b.data(), first);
  ScratchBuffer c(8 * kLarge);  // larger: a new one
  EXPECT_NE(c.data(), first);
}

TEST(ScratchBuffer, SmallBuffersAreNotKept) {
  ScratchBuffer::dropThreadCache();
  { ScratchBuffer a(kLarge - 1); }
  EXPECT_EQ(ScratchBuffer::dropThreadCache(), 0u);
  { ScratchBuffer a(kLarge); }
  EXPECT_EQ(ScratchBuffer::dropThreadCache(), 1u);
}

TEST(ScratchBuffer, AnInstalledAllocatorServesEveryBuffer) {
  ScratchBuffer::dropThreadCache();
  static tsfuse_test::CountingAllocator counting;
  c10::Allocator* previous = c10::GetCPUAllocator();
  c10::SetCPUAllocator(&counting, /*priority=*/UINT8_MAX);  // (>= every earlier test's)
  { ScratchBuffer a(4 * kLarge), b(100); }
  c10::SetCPUAllocator(previous, /*priority=*/UINT8_MAX);
  EXPECT_EQ(counting.blocks, 2);
  EXPECT_EQ(ScratchBuffer::dropThreadCache(), 0u);
}

TEST(ScratchBuffer, LiveBuffersNeverShareMemoryThroughMoves) {
  ScratchBuffer::dropThreadCache();
  std::vector<ScratchBuffer> live;
  for (size_t bytes : {size_t(4096), kLarge})
    for (int round = 0; round < 3; ++round) {
      {
        ScratchBuffer a(bytes);
        ScratchBuffer moved(std::move(a));  // a is now empty and must not release the block
        ScratchBuffer assigned;
        assigned = std::move(moved);
        EXPECT_TRUE(a.empty());
        EXPECT_TRUE(moved.empty());
        EXPECT_FALSE(assigned.empty());
      }
      live.emplace_back(bytes);
      live.emplace_back(bytes);
    }
  std::set<const char*> distinct;
  for (const ScratchBuffer& b : live) distinct.insert(b.data());
  EXPECT_EQ(distinct.size(), live.size());
}

TEST(ScratchBuffer, WhatAThreadKeepsIsBoundedAndItsOwn) {
  ScratchBuffer::dropThreadCache();
  { ScratchBuffer a(ScratchBuffer::kCacheBytes + 1); }  // too large to keep
  EXPECT_EQ(ScratchBuffer::dropThreadCache(), 0u);
  {
    std::vector<ScratchBuffer> many;
    for (size_t i = 0; i < ScratchBuffer::kCached + 2; ++i) many.emplace_back(kLarge);
  }
  EXPECT_EQ(ScratchBuffer::dropThreadCache(), ScratchBuffer::kCached);
  const char* mine;
  {
    ScratchBuffer m(kLarge);
    mine = m.data();
  }
  const char* other = nullptr;
  std::thread([&] {
    ScratchBuffer b(kLarge);  // not this thread's block
    other = b.data();
  }).join();
  EXPECT_NE(other, mine);
  ScratchBuffer back(kLarge);
  EXPECT_EQ(back.data(), mine);
}

}  // namespace

}  // namespace ops_scratch_test
