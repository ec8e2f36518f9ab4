// A reduce_chain whose next stage sums the last dim of stage 0's value (the Gaussian kernel sum)
// folds that sum into stage 0 on the CPU (kernels/runtime/chain.cpp, foldedRowSums): each row is summed
// in eager's cascade order (kernels/backends/cpu/row_sum.h) as the compiled kernel finishes it. Checked bit
// for bit against eager's ATen ops, across row lengths that take one tile or several and every
// branch of the cascade, keepdim, a higher rank, edge values and thread counts; then the named
// cases that do not fold, which must give the same values as before.
#include "chain_util.h"

#include "kernels/backends/cpu/jit/jit.h"

#include <ATen/Parallel.h>

namespace ops_chain_row_sum_test {

namespace {

using tsfuse_test::Gen;
using tsfuse_test::sameTensor;

const std::string kSq = "v1: sub($0, $1); mul(%0, %0)";
const std::string kKernel = "sum(dim=[2], keepdim=False) |> v1: mul($0, -2.0); exp(%0); mul(%1, $1)";

at::Tensor eagerChain(const std::vector<at::Tensor>& ops, const std::vector<std::string>& stages) {
  return tsfuse::evalChain(tsfuse::Chain::parse(kSq, stages), ops)[0];
}

// The chain through the op: its value, and whether the fold ran as expected for a chain it applies
// to: exactly where compiled kernels run (TSFUSE_CPU_JIT=0 or TSFUSE_CPU_ISA=baseline: declined).
std::pair<at::Tensor, bool> run(const std::vector<at::Tensor>& ops, const std::vector<std::string>& stages) {
  const int64_t before = tsfuse::chainRowSumsFolded();
  at::Tensor out = tsfuse::reduceChain(ops, kSq, stages);
  return {out, (tsfuse::chainRowSumsFolded() == before + 1) == tsfuse::cpu::jit::enabled()};
}

std::vector<at::Tensor> kernelSumOperands(Gen& g, int64_t n, int64_t m, int64_t d) {
  return {g.tensor({n, 1, d}, at::kFloat), g.tensor({m, d}, at::kFloat), g.tensor({m}, at::kFloat)};
}

TEST(ChainRowSum, KernelSumsAreEagersBitsForEveryRowLength) {
  Gen g(11);
  const std::vector<std::string> stages{kKernel, "sum(dim=[1], keepdim=False)"};
  for (int64_t m : {16, 17, 100, 511, 512, 513, 1024, 2500, 4099, 8192 + 4 * 8 * 3 + 5})
    for (int64_t n : {2, 3, 37})
      for (int64_t d : {1, 3, 7}) {
        const auto ops = kernelSumOperands(g, n, m, d);
        const std::string what = std::to_string(n) + " x " + std::to_string(m) + " x " + std::to_string(d);
        auto [got, folded] = run(ops, stages);
        EXPECT_TRUE(folded) << what;
        EXPECT_EQ(tsfuse::lastPath(), std::string("native")) << what;
        ASSERT_TRUE(sameTensor(eagerChain(ops, stages), got, /*exact=*/true)) << what;
      }
}

TEST(ChainRowSum, KeepdimAndAHigherRank) {
  Gen g(12);
  const std::vector<std::string> keep{kKernel, "sum(dim=[-1], keepdim=True)"};
  const auto ops = kernelSumOperands(g, 40, 700, 3);
  auto [got, folded] = run(ops, keep);
  EXPECT_TRUE(folded);
  EXPECT_TRUE(sameTensor(eagerChain(ops, keep), got, /*exact=*/true));

  // [B, N, M, D] summed over D, then over M: B x N rows.
  const std::vector<std::string> rank4{"sum(dim=[3], keepdim=False) |> v1: mul($0, -2.0); exp(%0); mul(%1, $1)",
                                       "sum(dim=[2], keepdim=False)"};
  const std::vector<at::Tensor> ops4{g.tensor({5, 9, 1, 3}, at::kFloat), g.tensor({300, 3}, at::kFloat),
                                     g.tensor({300}, at::kFloat)};
  auto [got4, folded4] = run(ops4, rank4);
  EXPECT_TRUE(folded4);
  EXPECT_TRUE(sameTensor(eagerChain(ops4, rank4), got4, /*exact=*/true));

  // Rows shorter than a vector (8 and 3 points per row): the compiled kernel over masked lanes,
  // several output rows a call.
  for (int64_t m : {8, 3}) {
    const std::vector<at::Tensor> few{g.tensor({500, 1, 3}, at::kFloat), g.tensor({m, 3}, at::kFloat),
                                      g.tensor({m}, at::kFloat)};
    auto [gotFew, foldedFew] = run(few, {kKernel, "sum(dim=[1], keepdim=False)"});
    EXPECT_TRUE(foldedFew) << m;
    EXPECT_TRUE(sameTensor(eagerChain(few, {kKernel, "sum(dim=[1], keepdim=False)"}), gotFew, /*exact=*/true)) << m;
  }
}

// NaN and infinities in the points (their rows only), -0.0 weights, distances whose exp underflows
// to subnormals and zero; then infinite and NaN weights, which reach every row.
TEST(ChainRowSum, EdgeValuesAreEagers) {
  Gen g(13);
  const std::vector<std::string> stages{kKernel, "sum(dim=[1], keepdim=False)"};
  auto ops = kernelSumOperands(g, 9, 600, 3);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  ops[0][1][0][2] = nan;
  ops[0][2][0][0] = inf;
  ops[1][17][1] = -inf;
  ops[1][301][0] = 7.5f;  // exp(-2 * 56) underflows past the subnormals
  ops[1][302][0] = 6.4f;  // ... into them
  ops[2].narrow(0, 100, 50).fill_(-0.0f);
  ops[0][5].fill_(100.0f);  // a row whose every term is 0 or -0
  auto [got, folded] = run(ops, stages);
  EXPECT_TRUE(folded);
  EXPECT_TRUE(sameTensor(eagerChain(ops, stages), got, /*exact=*/true));
  const at::Tensor finite = eagerChain(ops, stages).isfinite();
  EXPECT_EQ(finite.sum().item<int64_t>(), 8)
      << "only the NaN row is not finite (an infinite point is exp(-inf) = 0 away)";

  ops[2][400] = inf;
  ops[2][401] = nan;
  auto [gotInf, foldedInf] = run(ops, stages);
  EXPECT_TRUE(foldedInf);
  EXPECT_TRUE(sameTensor(eagerChain(ops, stages), gotInf, /*exact=*/true));
}

TEST(ChainRowSum, TheThreadCountDoesNotChangeTheBits) {
  Gen g(14);
  const std::vector<std::string> stages{kKernel, "sum(dim=[1], keepdim=False)"};
  const auto ops = kernelSumOperands(g, 301, 1500, 3);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const auto [one, foldedOne] = run(ops, stages);
  at::set_num_threads(std::max(2, threads));
  const auto [many, foldedMany] = run(ops, stages);
  at::set_num_threads(threads);
  EXPECT_TRUE(foldedOne && foldedMany);
  EXPECT_TRUE(sameTensor(one, many, /*exact=*/true));
  EXPECT_TRUE(sameTensor(eagerChain(ops, stages), many, /*exact=*/true));
}

// Named cases the fold declines: each still gives what the chain gave before (eager's values;
// exact where the later stage is ATen's own sum over whole rows).
TEST(ChainRowSum, DeclinedChainsKeepTheirValues) {
  Gen g(15);
  struct Declined {
    const char* name;
    std::vector<std::string> stages;
    int64_t n, m;
    at::ScalarType dtype;
    bool exact;
  };
  const std::vector<Declined> cases = {
      {"the next stage sums the first dim", {kKernel, "sum(dim=[0], keepdim=False)"}, 64, 700, at::kFloat, false},
      {"one row (eager may split its sum among threads)",
       {kKernel, "sum(dim=[1], keepdim=False)"},
       1,
       40000,
       at::kFloat,
       true},
      {"float64 values", {kKernel, "sum(dim=[1], keepdim=False)"}, 64, 700, at::kDouble, true},
      {"the next stage is a mean", {kKernel, "mean(dim=[1], keepdim=False)"}, 64, 700, at::kFloat, true},
  };
  for (const Declined& c : cases) {
    const std::vector<at::Tensor> ops{g.tensor({c.n, 1, 3}, c.dtype), g.tensor({c.m, 3}, c.dtype),
                                      g.tensor({c.m}, c.dtype)};
    const int64_t before = tsfuse::chainRowSumsFolded();
    const at::Tensor got = tsfuse::reduceChain(ops, kSq, c.stages);
    EXPECT_EQ(tsfuse::chainRowSumsFolded(), before) << c.name;
    EXPECT_TRUE(sameTensor(eagerChain(ops, c.stages), got, c.exact)) << c.name;
  }
}

}  // namespace

}  // namespace ops_chain_row_sum_test
