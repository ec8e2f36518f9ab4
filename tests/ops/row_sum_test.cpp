// eagerRowSum (kernels/backends/cpu/row_sum.h): ATen's whole cascade sum of a contiguous row, bit for bit,
// for lengths on both sides of every branch: scalar rows, vectors with and without values after
// them, groups below and past each cascade level (16 groups, 256, 4096), up to a row long enough
// that the cascade's level step grows (more than 2^16 groups).
#include "kernels/backends/cpu/row_sum.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace {

template <typename T>
void expectEagerBits(at::ScalarType type, int64_t n, int64_t rows, int64_t* distinguishing) {
  at::Tensor v = at::randn({rows, n}, at::kDouble);
  v.mul_(at::randn({rows, n}, at::kDouble).mul_(3).exp_());
  v = v.to(type);
  const at::Tensor want = v.sum(-1);  // rows > 1: each row summed whole by one thread
  const at::Tensor inOrder = v.to(at::kDouble).cumsum(-1).select(-1, n - 1).to(type);
  for (int64_t r = 0; r < rows; ++r) {
    const T got = tsfuse::cpu::eagerRowSum(v.const_data_ptr<T>() + r * n, n);
    const T w = want.const_data_ptr<T>()[r];
    EXPECT_EQ(std::memcmp(&got, &w, sizeof(T)), 0)
        << c10::toString(type) << " row of " << n << ": " << got << " vs eager " << w;
    *distinguishing += inOrder.const_data_ptr<T>()[r] != w;
  }
}

TEST(RowSum, EagersCascadeForEveryLength) {
  at::manual_seed(7);
  ASSERT_TRUE(tsfuse::cpu::eagerSumsRowsInCascade());
  int64_t distinguishing = 0;  // rows whose sum in index order (in double) differs: the order matters
  for (int64_t n : {1,          2,      3,
                    4,          5,      7,
                    8,          9,      15,
                    16,         17,     31,
                    32,         33,     63,
                    64,         100,    127,
                    128,        129,    511,
                    512,        513,    543,
                    1000,       1024,   2048,
                    4095,       4096,   8191,
                    8192,       8193,   8192 + 4 * 8 * 3 + 5,
                    65536 + 37, 131072, 131072 + 4 * 8 * 4096 + 9}) {
    expectEagerBits<float>(at::kFloat, n, 3, &distinguishing);
    expectEagerBits<double>(at::kDouble, n, 3, &distinguishing);
  }
  EXPECT_GT(distinguishing, 40);
}

// Past 2^16 groups of four vectors the cascade's level step grows from 16 groups to 32.
TEST(RowSum, EagersCascadeWhereTheLevelStepGrows) {
  at::manual_seed(8);
  int64_t distinguishing = 0;
  expectEagerBits<float>(at::kFloat, (int64_t(1) << 16) * 4 * 8 * 2 + 4 * 8 * 33 + 3, 2, &distinguishing);
  expectEagerBits<double>(at::kDouble, (int64_t(1) << 16) * 4 * 4 * 2 + 77, 2, &distinguishing);
  EXPECT_GT(distinguishing, 0);
}

}  // namespace
