// The scratch buffers' per-thread cache (kernels/cpu/scratch.h): a released buffer serves the
// thread's next one that fits, live buffers never share memory (moves included: a moved-from
// c10::DataPtr still returns its pointer), and what the cache keeps is bounded.
#include "kernels/cpu/scratch.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

namespace ops_scratch_test {

namespace {

using tsfuse::cpu::ScratchBuffer;

TEST(ScratchBuffer, AReleasedBufferServesTheNextThatFits) {
  ScratchBuffer::dropThreadCache();
  const char* first;
  {
    ScratchBuffer a(100000);
    first = a.data();
  }
  ScratchBuffer b(50000);  // smaller: the same block
  EXPECT_EQ(b.data(), first);
  ScratchBuffer c(200000);  // larger: a new one
  EXPECT_NE(c.data(), first);
}

TEST(ScratchBuffer, LiveBuffersNeverShareMemoryThroughMoves) {
  ScratchBuffer::dropThreadCache();
  std::vector<ScratchBuffer> live;
  for (int round = 0; round < 3; ++round) {
    {
      ScratchBuffer a(4096);
      ScratchBuffer moved(std::move(a));  // a is now empty and must not return the block
      ScratchBuffer assigned;
      assigned = std::move(moved);
      EXPECT_TRUE(a.empty());
      EXPECT_TRUE(moved.empty());
      EXPECT_FALSE(assigned.empty());
    }
    live.emplace_back(4096);
    live.emplace_back(4096);
  }
  std::set<const char*> distinct;
  for (const ScratchBuffer& b : live) distinct.insert(b.data());
  EXPECT_EQ(distinct.size(), live.size());
}

TEST(ScratchBuffer, TheCacheIsBoundedAndPerThread) {
  ScratchBuffer::dropThreadCache();
  { ScratchBuffer a(ScratchBuffer::kCacheBytes + 1); }  // too large to keep
  EXPECT_EQ(ScratchBuffer::threadCacheSize(), 0u);
  std::vector<ScratchBuffer> many;
  for (size_t i = 0; i < ScratchBuffer::kCached + 2; ++i) many.emplace_back(1000 + i);
  many.clear();  // only kCached of them stay: the largest
  EXPECT_EQ(ScratchBuffer::threadCacheSize(), ScratchBuffer::kCached);
  {
    ScratchBuffer smallest(1000);  // served by the smallest kept (1002), not a new block
    EXPECT_EQ(ScratchBuffer::threadCacheSize(), ScratchBuffer::kCached - 1);
  }
  // A block in this thread's cache does not serve another thread.
  const char* mine;
  {
    ScratchBuffer m(3000);
    mine = m.data();
  }
  const char* other = nullptr;
  std::thread([&] { other = ScratchBuffer(3000).data(); }).join();
  EXPECT_NE(other, mine);
  ScratchBuffer back(3000);
  EXPECT_EQ(back.data(), mine);
}

}  // namespace

}  // namespace ops_scratch_test
