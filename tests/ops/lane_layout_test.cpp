// Where a reduction's tiles find their operands (kernels/backends/cpu/reduce.cpp):
//  * an operand the tiles would gather along their lanes (a point set [M, D] read down its columns
//    by the gradient of [N, D] points) is copied once per call with the lanes' dim innermost, where
//    it is small beside the broadcast space: the same bits as the call on an operand laid out that
//    way already, and eager's values;
//  * an output row too short for vertical tiles' lanes (D = 3) folds in horizontal tiles along a
//    reduced space that fills them, with the interpreter's bits in the compiled pieces.
#include "jit_support.h"

#include "kernels/backends/cpu/drivers.h"

namespace ops_lane_layout_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

// exp(-2 |x - y|^2) per coordinate, as a Gaussian kernel's gradient reads its points.
const char* kGauss = "v1: sub($0, $1); mul(%0, %0); mul(%1, -2.0); exp(%2)";
at::Tensor gauss(const T& o) { return at::exp((o[0] - o[1]) * (o[0] - o[1]) * -2.0); }

// The same values in memory with dim `d` innermost.
at::Tensor innermost(const at::Tensor& t, int64_t d) { return t.movedim(d, -1).contiguous().movedim(-1, d); }

// Runs `call` and returns its result and how many operands it copied.
std::pair<at::Tensor, int64_t> counted(const std::function<at::Tensor()>& call) {
  const int64_t before = tsfuse::cpu::relaidOperands();
  at::Tensor r = call();
  return {r, tsfuse::cpu::relaidOperands() - before};
}

TEST(LaneLayout, PointsReadDownTheirColumnsAreCopiedOnceWithTheSameBits) {
  Gen g(61);
  const ReduceArgs overM{"sum", std::vector<int64_t>{1}};
  for (at::ScalarType dt : {at::kFloat, at::kDouble})
    for (int64_t m : {200, 500, 1300}) {
      // [N, 1, 3] against [1, M, 3] summed over M: the output rows hold 3 values, the tiles run
      // along M, where y's values are 3 apart.
      const at::Tensor x = g.tensor({64, 1, 3}, dt, kNaNInf), y = g.tensor({1, m, 3}, dt, kNaNInf);
      const std::string what = std::to_string(m) + " " + c10::toString(dt);
      auto [relaid, copies] = counted([&] { return tsfuse::reduce({x, y}, kGauss, "sum", std::vector<int64_t>{1}); });
      EXPECT_EQ(copies, 1) << what;
      auto [laidOut, none] = counted([&] {
        return tsfuse::reduce({x, innermost(y, 1)}, kGauss, "sum", std::vector<int64_t>{1});
      });
      EXPECT_EQ(none, 0) << what;
      EXPECT_TRUE(sameTensor(laidOut, relaid, /*exact=*/true)) << what;
      EXPECT_TRUE(reduceBoth(kGauss, {x, y}, gauss, overM, CheckOpts{false}, what).result);
    }
}

TEST(LaneLayout, ATransposedOperandOfAVerticalSumIsReadInPlaceAfterItsCopy) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(62);
  // b [K, 1, 1] times a [64, M] stored transposed, summed over its first two dims: the lanes run
  // along M, 64 values apart in a; its copy makes them adjacent and the compiled kernel applies.
  const char* expr = "v1: mul($0, $1)";
  auto eager = [](const T& o) { return o[0] * o[1]; };
  const ReduceArgs overKD{"sum", std::vector<int64_t>{0, 1}};
  for (int64_t m : {40, 600}) {
    const at::Tensor b = g.tensor({16, 1, 1}, at::kFloat), a = g.tensor({m, 64}, at::kFloat, kNaNInf).t();
    const std::string what = "M = " + std::to_string(m);
    auto [relaid, copies] = counted([&] { return tsfuse::reduce({b, a}, expr, "sum", std::vector<int64_t>{0, 1}); });
    EXPECT_EQ(copies, 1) << what;
    auto [laidOut, none] = counted([&] {
      return tsfuse::reduce({b, a.contiguous()}, expr, "sum", std::vector<int64_t>{0, 1});
    });
    EXPECT_EQ(none, 0) << what;
    EXPECT_TRUE(sameTensor(laidOut, relaid, /*exact=*/true)) << what;
    EXPECT_TRUE(checkBoth(expr, {b, a}, eager, overKD, /*compiled=*/true, CheckOpts{false}));
  }
}

TEST(LaneLayout, AnOperandAsLargeAsTheSpaceIsNotCopied) {
  Gen g(63);
  // y [1, 500, 3] against 4 points: y holds a quarter of the space's values, and is read where it
  // is (gathered per tile).
  const at::Tensor x = g.tensor({4, 1, 3}, at::kFloat), y = g.tensor({1, 500, 3}, at::kFloat);
  auto [r, copies] = counted([&] { return tsfuse::reduce({x, y}, kGauss, "sum", std::vector<int64_t>{1}); });
  EXPECT_EQ(copies, 0);
  EXPECT_TRUE(checkReduce(kGauss, {x, y}, gauss, {"sum", std::vector<int64_t>{1}}, CheckOpts{false}));
}

}  // namespace

}  // namespace ops_lane_layout_test
