// Operands packed per line (jit::VerticalReduce::packsPerLine): a batch of point clouds,
// x[b, i, d] against y[b, j, d], reads y along the lanes (j) with a stride, the same for every
// output row i of a batch but not from one batch to the next. The compiled kernels pack it again
// for each line (batch) instead of declining to the interpreter. Each case checks that the
// compiled kernels ran and gave the interpreter's bits, and eager's values: sums over wide and
// narrow (swapped) outputs, two batch dims, operands packed in panels per line, max/min with
// their first indices, and the batched Gaussian kernel sum's chain.
#include "chain_util.h"
#include "jit_support.h"

namespace ops_packed_lines_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

const char* kSq = "v1: sub($0, $1); mul(%0, %0)";
at::Tensor sq(const T& o) { return (o[0] - o[1]) * (o[0] - o[1]); }

// Points x[..., n, 1, d] against y[..., 1, m, d], batch dims `batch`.
T clouds(Gen& g, std::vector<int64_t> batch, int64_t n, int64_t m, int64_t d, at::ScalarType dt, int specials = 0) {
  std::vector<int64_t> xs = batch, ys = batch;
  xs.insert(xs.end(), {n, 1, d});
  ys.insert(ys.end(), {1, m, d});
  return {g.tensor(xs, dt, specials), g.tensor(ys, dt, specials)};
}

TEST(PackedLines, BatchedSumsAreTheInterpretersBits) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(51);
  const ReduceArgs lastDim{"sum", std::vector<int64_t>{-1}};
  struct Case {
    std::vector<int64_t> batch;
    int64_t n, m, d;
    at::ScalarType dt;
  };
  // Wide outputs (m >= 16); narrow ones (m < 16: lanes along n, x packed per line); two batch
  // dims; float64; y past the pack budget in each batch (5000 x 64 float32: panels per line).
  // Lines of at least 2^16 values run one at a time on every thread; smaller ones (the last four:
  // many small clouds, narrow ones among them, a single line) whole lines a thread, each thread
  // packing its own.
  for (const Case& c :
       {Case{{3}, 300, 100, 3, at::kFloat}, Case{{4}, 5000, 5, 3, at::kFloat}, Case{{2, 3}, 200, 33, 11, at::kFloat},
        Case{{3}, 150, 50, 9, at::kDouble}, Case{{2}, 5, 5000, 64, at::kFloat}, Case{{50}, 8, 20, 3, at::kFloat},
        Case{{37}, 40, 5, 3, at::kFloat}, Case{{3, 7}, 17, 33, 2, at::kDouble}, Case{{1}, 30, 40, 3, at::kFloat}}) {
    const T ops = clouds(g, c.batch, c.n, c.m, c.d, c.dt, kNaNInf);
    const std::string what = describeOperands(ops);
    EXPECT_TRUE(expectBoth(reduceBoth(kSq, ops, sq, lastDim, CheckOpts{false}, what), true, what));
  }
}

TEST(PackedLines, BatchedExtremaKeepTheirFirstIndex) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(52);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::string red : {"max", "min"})
    for (int64_t m : {40, 6, 41}) {  // 41: 25 clouds of 30 points, whole clouds a thread
      T ops = clouds(g, {m == 41 ? 25 : 3}, m == 6 ? 4000 : m == 41 ? 30 : 600, m, 3, at::kFloat);
      for (at::Tensor& t : ops) t = at::round(t * 2) / 4;  // quarters: ties
      ops[1][2][0][1][0] = nan;
      const std::string what = red + " over " + describeOperands(ops);
      EXPECT_TRUE(expectBoth(extremaBoth(kSq, ops, sq, red, 3, what), true, what));
    }
}

// The batched Gaussian kernel sum: stage 0's rows summed in eager's order, batch by batch.
TEST(PackedLines, BatchedKernelSumsAreEagersBits) {
  Gen g(53);
  const std::string kernel = "sum(dim=[3], keepdim=False) |> v1: mul($0, -2.0); exp(%0); mul(%1, $1)";
  const std::vector<std::string> stages{kernel, "sum(dim=[2], keepdim=False)"};
  for (int64_t m : {3, 700}) {
    T ops = clouds(g, {4}, m == 3 ? 8000 : 300, m, 3, at::kFloat);
    ops.push_back(g.tensor({4, 1, m}, at::kFloat));  // a weight per batch and point
    const at::Tensor want = tsfuse::evalChain(tsfuse::Chain::parse(kSq, stages), ops)[0];
    const int64_t tiles = jit::tilesRun();
    const at::Tensor got = tsfuse::reduceChain(ops, kSq, stages);
    EXPECT_TRUE(sameTensor(want, got, /*exact=*/true)) << m;
    EXPECT_EQ(jit::tilesRun() > tiles, jit::enabled()) << m;
  }
}

// Small lines with an epilogue: each thread's buffers (the epilogue's scratch among them) serve all
// its lines, and every line is finished with its own epilogue operands (a weight per cloud and point).
TEST(PackedLines, SmallBatchesFinishEveryLineWithItsOwnEpilogueOperands) {
  tsfuse_test::ReductionsNotUnrolled paths;  // (a few values per output)
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(54);
  for (int64_t clouds_ : {50, 3}) {
    T ops = clouds(g, {clouds_}, 8, 20, 3, at::kFloat);
    ops.push_back(g.tensor({clouds_, 1, 20}, at::kFloat));
    const at::Tensor want = at::sqrt(sq(ops).sum(-1)) * ops[2];
    const int64_t tiles = jit::tilesRun();
    const at::Tensor got =
        tsfuse::reduce(ops, kSq, "sum", std::vector<int64_t>{-1}, false, std::nullopt, "v1: sqrt($0); mul(%0, $1)");
    EXPECT_GT(jit::tilesRun(), tiles) << clouds_;
    EXPECT_TRUE(sameTensor(want, got, /*exact=*/false)) << clouds_;
  }
}

}  // namespace

}  // namespace ops_packed_lines_test
