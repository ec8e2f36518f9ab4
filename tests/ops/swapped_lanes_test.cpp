// Outputs whose innermost dim is short and the dim outside it long (distances from many points to
// a few centroids: [n, m], m < 16) run their compiled tiles along that outer dim, every row of the
// short dim in one work item, written m elements apart (kernels/backends/cpu/reduce.cpp, swapsLanes; row
// sums of a reduce_chain summed across those rows), as do the tiles of programs run in compiled
// pieces. Each case checks that the swap ran, that the compiled kernels give the interpreter's bits, and eager's
// values: sums with and without an epilogue over operands along either dim, max/min with their
// first indices through ties and NaN, higher ranks, permuted layouts, operands packed in panels,
// Gaussian kernel sums folded into row sums, and thread counts.
#include "chain_util.h"
#include "jit_support.h"

#include "kernels/backends/cpu/drivers.h"

#include <ATen/Parallel.h>

namespace ops_swapped_lanes_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

const char* kSq = "v1: sub($0, $1); mul(%0, %0)";
at::Tensor sq(const T& o) { return (o[0] - o[1]) * (o[0] - o[1]); }

// both() runs a call once with the compiled kernels and once interpreted (runBoth, extremaBoth):
// the swap must have run in the first and the two results must be the same bits.
::testing::AssertionResult swappedAndInterpretedAgree(const std::function<BothRuns()>& both, const std::string& what) {
  const int64_t before = tsfuse::cpu::swappedLaneReductions();
  const BothRuns b = both();
  if (!b.result) return b.result;
  if (!b.ran || tsfuse::cpu::swappedLaneReductions() == before)
    return ::testing::AssertionFailure() << "the swapped compiled tiles did not run for " << what;
  return ::testing::AssertionSuccess();
}

TEST(SwappedLanes, NarrowSumsAreTheInterpretersBits) {
  tsfuse_test::ReductionsNotUnrolled paths;  // (a few values per output)
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(41);
  const ReduceArgs lastDim{"sum", std::vector<int64_t>{-1}};
  struct Size {
    int64_t n, m, d;
    at::ScalarType dt;
  };
  // Lane tails (37, 700), several tiles, d = 64 over 5000 points: the packed points (1.25 MiB)
  // go in panels; float64; m = 2 and 15 (the widest short dim).
  for (const Size s : {Size{16, 2, 3, at::kFloat}, Size{37, 3, 1, at::kFloat}, Size{700, 15, 3, at::kFloat},
                       Size{5000, 8, 64, at::kFloat}, Size{1100, 5, 40, at::kDouble}}) {
    T ops = {g.tensor({s.n, 1, s.d}, s.dt, kNaNInf), g.tensor({1, s.m, s.d}, s.dt, kAllSpecials)};
    const std::string what = std::to_string(s.n) + " x " + std::to_string(s.m) + " x " + std::to_string(s.d);
    EXPECT_TRUE(
        swappedAndInterpretedAgree([&] { return reduceBoth(kSq, ops, sq, lastDim, CheckOpts{false}, what); }, what));
  }
}

TEST(SwappedLanes, EpilogueOperandsAlongEitherDim) {
  tsfuse_test::ReductionsNotUnrolled paths;  // (a few values per output)
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(42);
  const int64_t n = 600, m = 5;
  T ops = {g.tensor({n, 1, 3}, at::kFloat), g.tensor({1, m, 3}, at::kFloat)};
  const std::string epi = "v1: mul($0, -2.0); exp(%0); mul(%1, $1)";
  // Per column (a weight per centroid), per row, one per output, and a transposed full one.
  for (const at::Tensor& w : {g.tensor({m}, at::kFloat), g.tensor({n, 1}, at::kFloat), g.tensor({n, m}, at::kFloat),
                              g.tensor({m, n}, at::kFloat).t()}) {
    const std::string what = "epilogue operand " + describeOperands({w});
    T all = ops;
    all.push_back(w);
    auto check = [&]() -> ::testing::AssertionResult {
      const at::Tensor want = at::exp(sq(ops).sum(-1) * -2.0) * w;
      const at::Tensor got = tsfuse::reduce(all, kSq, "sum", std::vector<int64_t>{-1}, false, std::nullopt, epi);
      return sameTensor(want, got, /*exact=*/false);
    };
    auto run = [&] { return tsfuse::reduce(all, kSq, "sum", std::vector<int64_t>{-1}, false, std::nullopt, epi); };
    EXPECT_TRUE(swappedAndInterpretedAgree([&] { return runBoth(check, run, what); }, what));
  }
}

TEST(SwappedLanes, ExtremaKeepTheirFirstIndex) {
  tsfuse_test::ReductionsNotUnrolled paths;  // (a few values per output)
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(43);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::string red : {"max", "min"})
    for (int64_t d : {3, 40}) {
      // Quarters: ties along every reduced row; a NaN in a few points.
      at::Tensor x = at::round(g.tensor({900, 1, d}, at::kFloat) * 2) / 4,
                 y = at::round(g.tensor({1, 6, d}, at::kFloat) * 2) / 4;
      x[7][0][d - 1] = nan;
      x[300][0][0] = nan;
      const T ops = {x, y};
      const std::string what = red + " over d = " + std::to_string(d);
      EXPECT_TRUE(swappedAndInterpretedAgree([&] { return extremaBoth(kSq, ops, sq, red, 2, what); }, what));
    }
}

TEST(SwappedLanes, ProgramsInCompiledPiecesAreEagersBits) {
  tsfuse_test::ReductionsNotUnrolled paths;  // (a few values per output)
  // A spectral mixture kernel's terms, exp(-2 pi^2 d^2) * cos(2 pi d) per mixture k, summed over
  // k (the outermost dim) into [n, m, 3]: exp and cos are eager's routines between compiled runs,
  // so no compiled kernel folds the tile; the pieces' tiles run along m all the same, not 3 at a
  // time. Sums (with an epilogue) and first maxima with their indices, against eager's bits.
  Gen g(45);
  const std::string expr =
      "v1: sub($0, $1); mul(%0, %0); mul(%1, -19.7392); exp(%2); mul(%0, 6.2832); cos(%4); "
      "mul(%3, %5); mul(%6, $2)";
  const T ops = {g.tensor({4, 300, 1, 3}, at::kFloat), g.tensor({4, 1, 200, 3}, at::kFloat),
                 g.tensor({4, 1, 1, 1}, at::kFloat)};
  const at::Tensor d = ops[0] - ops[1];
  const at::Tensor value = at::exp(d * d * -19.7392) * at::cos(d * 6.2832) * ops[2];
  const int64_t before = tsfuse::cpu::swappedLaneReductions();
  const at::Tensor sum = tsfuse::reduce(ops, expr, "sum", std::vector<int64_t>{0}, false, std::nullopt, std::nullopt);
  EXPECT_TRUE(sameTensor(value.sum(0), sum, /*exact=*/true));
  T withScale = ops;
  withScale.push_back(g.tensor({300, 1, 1}, at::kFloat));
  const at::Tensor scaled = tsfuse::reduce(withScale, expr, "sum", std::vector<int64_t>{0}, false, std::nullopt,
                                           std::string("v1: mul($0, $1)"));
  EXPECT_TRUE(sameTensor(value.sum(0) * withScale[3], scaled, /*exact=*/true));
  const auto [values, indices] = tsfuse::reduceWithIndices(ops, expr, "max", 0, false, std::nullopt);
  const auto [wantValues, wantIndices] = value.max(0);
  EXPECT_TRUE(sameTensor(wantValues, values, /*exact=*/true));
  EXPECT_TRUE(at::equal(wantIndices, indices));
  if (haveJit()) EXPECT_GE(tsfuse::cpu::swappedLaneReductions(), before + 3) << "the swapped tiles did not run";
}

TEST(SwappedLanes, HigherRanksAndPermutedLayouts) {
  tsfuse_test::ReductionsNotUnrolled paths;  // (a few values per output)
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(44);
  const ReduceArgs lastDim{"sum", std::vector<int64_t>{-1}};
  // [3, 200, 4] outputs: three lines of rows (points shared by three sets of centroids: an
  // operand packed along the lanes must be the same for every row); then points given transposed
  // (the output's layout follows eager's, whatever it is); then keepdim.
  const T batched = {g.tensor({1, 200, 1, 7}, at::kFloat), g.tensor({3, 1, 4, 7}, at::kFloat)};
  const T transposed = {g.tensor({5, 1, 300}, at::kFloat).permute({2, 1, 0}), g.tensor({1, 9, 5}, at::kFloat)};
  for (const T& ops : {batched, transposed}) {
    const std::string what = describeOperands(ops);
    EXPECT_TRUE(
        swappedAndInterpretedAgree([&] { return reduceBoth(kSq, ops, sq, lastDim, CheckOpts{false}, what); }, what));
  }
  const ReduceArgs keep{"sum", std::vector<int64_t>{-1}, true};
  EXPECT_TRUE(swappedAndInterpretedAgree(
      [&] { return reduceBoth(kSq, batched, sq, keep, CheckOpts{false}, "keepdim"); }, "keepdim"));
}

// The Gaussian kernel sum over a few centroids: stage 0's [n, m] rows summed across the swapped
// tile's rows, lane by lane, in eager's order.
TEST(SwappedLanes, KernelSumsOverFewCentroidsAreEagersBits) {
  tsfuse_test::ReductionsNotUnrolled paths;  // (a few values per output)
  Gen g(45);
  const std::string kernel = "sum(dim=[2], keepdim=False) |> v1: mul($0, -2.0); exp(%0); mul(%1, $1)";
  const std::vector<std::string> stages{kernel, "sum(dim=[1], keepdim=False)"};
  auto eager = [&](const T& ops) { return tsfuse::evalChain(tsfuse::Chain::parse(kSq, stages), ops)[0]; };
  for (int64_t m : {2, 3, 8, 15})
    for (int64_t n : {16, 333, 5000})
      for (int64_t d : {1, 3, 64}) {
        T ops = {g.tensor({n, 1, d}, at::kFloat), g.tensor({m, d}, at::kFloat), g.tensor({m}, at::kFloat)};
        ops[2][0] = -0.0f;
        const std::string what = std::to_string(n) + " x " + std::to_string(m) + " x " + std::to_string(d);
        const int64_t folded = tsfuse::chainRowSumsFolded(), swapped = tsfuse::cpu::swappedLaneReductions();
        const at::Tensor got = tsfuse::reduceChain(ops, kSq, stages);
        EXPECT_TRUE(sameTensor(eager(ops), got, /*exact=*/true)) << what;
        if (!tsfuse::cpu::jit::enabled()) continue;
        EXPECT_EQ(tsfuse::chainRowSumsFolded(), folded + 1) << what;
        EXPECT_EQ(tsfuse::cpu::swappedLaneReductions(), swapped + 1) << what;
      }
  // The same bits on one thread and on several.
  const T ops = {g.tensor({4000, 1, 3}, at::kFloat), g.tensor({7, 3}, at::kFloat), g.tensor({7}, at::kFloat)};
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const at::Tensor one = tsfuse::reduceChain(ops, kSq, stages);
  at::set_num_threads(std::max(2, threads));
  const at::Tensor many = tsfuse::reduceChain(ops, kSq, stages);
  at::set_num_threads(threads);
  EXPECT_TRUE(sameTensor(one, many, /*exact=*/true));
}

}  // namespace

}  // namespace ops_swapped_lanes_test
