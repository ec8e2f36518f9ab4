// ReusedOutput (kernels/backends/reused_output.h): the pieces of one call share a thread's buffer only when
// nothing else holds it, so a piece's value is never written while a caller still reads it.
#include "test_util.h"

#include "kernels/backends/reused_output.h"

#include <thread>

namespace ops_reused_output_test {

namespace {

using tsfuse::ReusedOutput;

at::Tensor alloc(int64_t n) { return ReusedOutput::allocate({n}, {1}, at::TensorOptions().dtype(at::kFloat)); }

TEST(ReusedOutput, ABufferIsReusedOnlyOnceNothingHoldsIt) {
  ReusedOutput scope;
  at::Tensor a = alloc(1000);
  const void* first = a.data_ptr();
  at::Tensor b = alloc(1000);  // a is alive: fresh memory
  EXPECT_NE(b.data_ptr(), first);
  a.reset();
  b.reset();
  at::Tensor c = alloc(800);  // b became the kept buffer when a was still held
  at::Tensor v = c.view({20, 40});
  c.reset();
  at::Tensor d = alloc(800);  // a view still holds c's memory
  EXPECT_NE(d.data_ptr(), v.data_ptr());
  v.reset();
  d.reset();
  const void* kept = alloc(600).data_ptr();  // dropped at once: its memory is free again
  EXPECT_EQ(alloc(700).data_ptr(), kept);
  EXPECT_NE(alloc(4000).data_ptr(), nullptr);  // larger than the buffer: a new one
}

TEST(ReusedOutput, OnlyInsideAScopeAndPerThread) {
  at::Tensor held;
  {
    ReusedOutput scope;
    held = alloc(1000);
  }
  at::Tensor fresh = alloc(1000);  // no scope: never the kept buffer
  EXPECT_NE(fresh.data_ptr(), held.data_ptr());
  const void* keptHere = held.data_ptr();
  held.reset();
  const void* other = nullptr;
  std::thread t([&] {
    ReusedOutput scope;
    other = alloc(1000).data_ptr();  // this thread's own buffer
  });
  t.join();
  ReusedOutput scope;
  EXPECT_EQ(alloc(1000).data_ptr(), keptHere);
  EXPECT_NE(other, nullptr);
}

}  // namespace

}  // namespace ops_reused_output_test
