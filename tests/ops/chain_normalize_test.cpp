// tsfuse::reduce_chain's normalizing stages (kernels/runtime/chain.h, NormalizeStage): softmax,
// log_softmax and division by the sum of a fused reduction's value, each slab's rows written into
// the output by ATen's ops. Checked bit for bit against the same computation unchained
// (tsfuse::reduce storing the value, then ATen's ops over it) for any number of slabs, every dim of
// values of rank 2 and 3, float and double, and layouts; then a reduction after the softmax,
// eager's own errors, empty values, autograd and malformed stages.
#include "chain_util.h"

#include "kernels/runtime/sweep.h"

namespace ops_chain_normalize_test {

namespace {

using tsfuse_test::errorOf;
using tsfuse_test::Gen;
using tsfuse_test::sameTensor;

class ChainNormalize : public tsfuse_test::ManySlabs {};

const std::string kSq = "v1: sub($0, $1); mul(%0, %0)";

const char* const kKinds[] = {"softmax", "log_softmax", "div_sum"};

std::string stageText(int kind, int64_t dim) { return std::string(kKinds[kind]) + "(dim=" + std::to_string(dim) + ")"; }

// Stage 0 stored by tsfuse::reduce (its sum over the last dim, times -0.5, exp'd for div_sum),
// then ATen's ops.
const char* epilogueOf(int kind) { return kind == 2 ? "v1: mul($0, -0.5); exp(%0)" : "v1: mul($0, -0.5)"; }

at::Tensor unchained(const at::Tensor& x, const at::Tensor& y, int kind, int64_t dim) {
  at::Tensor v =
      tsfuse::reduce({x, y}, kSq, "sum", std::vector<int64_t>{-1}, false, std::nullopt, std::string(epilogueOf(kind)));
  if (kind == 0) return at::softmax(v, dim);
  if (kind == 1) return at::log_softmax(v, dim);
  return v / v.sum({dim}, /*keepdim=*/true);
}

std::vector<std::string> stages(int kind, int64_t dim) {
  return {std::string("sum(dim=[-1], keepdim=False) |> ") + epilogueOf(kind), stageText(kind, dim)};
}

TEST_F(ChainNormalize, ManySlabsGiveTheUnchainedBits) {
  Gen g(31);
  for (int i = 0; i < 96; ++i) {
    const int kind = i % 3;
    const bool batched = i % 4 >= 2;
    const at::ScalarType dt = i % 8 == 5 ? at::kDouble : at::kFloat;
    const int64_t b = 1 + g.randint(0, 4), n = 1 + g.randint(0, 40), m = 1 + g.randint(0, 90), d = 1 + g.randint(0, 5);
    at::Tensor x = batched ? g.tensor({b, n, 1, d}, dt) : g.tensor({n, 1, d}, dt);
    at::Tensor y = batched ? g.tensor({b, 1, m, d}, dt) : g.tensor({m, d}, dt);
    if (i % 5 == 1) y = y.transpose(-1, -2).contiguous().transpose(-1, -2);  // y strided along D
    const int64_t rank = batched ? 3 : 2;
    const int64_t dim = g.randint(-rank, rank - 1);
    at::Tensor got = tsfuse::reduceChain({x, y}, kSq, stages(kind, dim));
    ASSERT_TRUE(sameTensor(unchained(x, y, kind, dim), got, /*exact=*/true))
        << stageText(kind, dim) << " #" << i << " of " << x.sizes() << " and " << y.sizes();
  }
}

// The same at the default slab size, over values of several slabs (the vectorized rows of ATen's
// softmax and sum, up to 4096 long).
TEST(ChainNormalizeLarge, DefaultSlabsGiveTheUnchainedBits) {
  Gen g(32);
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{1000, 700}, {3, 100000}, {70000, 5}, {4099, 4096}}) {
    at::Tensor x = g.tensor({n, 1, 3}, at::kFloat), y = g.tensor({m, 3}, at::kFloat);
    for (int64_t dim : {1, 0})
      for (int kind = 0; kind < 3; ++kind)
        ASSERT_TRUE(sameTensor(unchained(x, y, kind, dim), tsfuse::reduceChain({x, y}, kSq, stages(kind, dim)),
                               /*exact=*/true))
            << n << " x " << m << " " << stageText(kind, dim);
  }
}

TEST_F(ChainNormalize, AReductionAfterTheSoftmaxReadsItsValue) {
  Gen g(33);
  at::Tensor x = g.tensor({37, 1, 3}, at::kFloat), y = g.tensor({29, 3}, at::kFloat);
  const std::vector<std::string> stages{"sum(dim=[-1], keepdim=False) |> v1: mul($0, -0.5)", "softmax(dim=1)",
                                        "max(dim=[1], keepdim=False)"};
  auto [v, i] = tsfuse::reduceChainWithIndices({x, y}, kSq, stages);
  auto [wv, wi] = at::max(unchained(x, y, 0, 1), 1);
  EXPECT_TRUE(sameTensor(wv, v, /*exact=*/true));
  EXPECT_TRUE(sameTensor(wi, i, /*exact=*/true));
}

TEST_F(ChainNormalize, EagersErrorsAndEmptyValues) {
  Gen g(34);
  at::Tensor x = g.tensor({9, 1, 3}, at::kFloat), y = g.tensor({7, 3}, at::kFloat);
  const std::string stage0 = "sum(dim=[-1], keepdim=False)";
  const std::string outOfRange = errorOf([&] { tsfuse::reduceChain({x, y}, kSq, {stage0, "softmax(dim=2)"}); });
  EXPECT_EQ(outOfRange, errorOf([&] { at::softmax(((x - y) * (x - y)).sum(-1), 2); }));
  EXPECT_NE(outOfRange.find("Dimension out of range"), std::string::npos) << outOfRange;
  at::Tensor xi = x.to(at::kLong), yi = y.to(at::kLong);
  const std::string integer = errorOf([&] { tsfuse::reduceChain({xi, yi}, kSq, {stage0, "softmax(dim=1)"}); });
  EXPECT_EQ(integer, errorOf([&] { at::softmax(((xi - yi) * (xi - yi)).sum(-1), 1); }));
  EXPECT_FALSE(integer.empty());
  at::Tensor empty = tsfuse::reduceChain({x.narrow(0, 0, 0), y}, kSq, {stage0, "log_softmax(dim=1)"});
  EXPECT_TRUE(sameTensor(at::log_softmax(((x - y) * (x - y)).sum(-1).narrow(0, 0, 0), 1), empty, /*exact=*/true));
}

TEST_F(ChainNormalize, AutogradRunsTheReference) {
  Gen g(35);
  at::Tensor x = g.tensor({11, 1, 3}, at::kFloat).requires_grad_(), y = g.tensor({13, 3}, at::kFloat);
  at::Tensor w = g.tensor({11, 13}, at::kFloat);
  at::Tensor got = tsfuse::reduceChain({x, y}, kSq, {"sum(dim=[-1], keepdim=False)", "softmax(dim=1)"});
  (got * w).sum().backward();
  at::Tensor x2 = x.detach().clone().requires_grad_();
  at::Tensor want = at::softmax(((x2 - y) * (x2 - y)).sum(-1), 1);
  (want * w).sum().backward();
  EXPECT_TRUE(sameTensor(want.detach(), got.detach(), /*exact=*/true));
  EXPECT_TRUE(sameTensor(x2.grad(), x.grad(), /*exact=*/true));
}

TEST(ChainNormalizeText, MalformedStagesAndSweepBranchesAreRefused) {
  const std::string stage0 = "sum(dim=[-1], keepdim=False)";
  for (const char* bad : {"softmax(dim=x)", "softmax(dim=1", "log_softmax(dim=1) |> v1: neg($0)", "softmax(dim=)"})
    EXPECT_NE(errorOf([&] { tsfuse::Chain::parse(kSq, {stage0, bad}); }).find("expected '"), std::string::npos) << bad;
  EXPECT_FALSE(errorOf([&] { tsfuse::Chain::parse(kSq, {"softmax(dim=1)", stage0}); }).empty());
  const tsfuse::Chain c = tsfuse::Chain::parse(kSq, {stage0, "log_softmax(dim=-1)"});
  ASSERT_TRUE(c.normalize[1].has_value());
  EXPECT_EQ(c.normalize[1]->dim, -1);
  EXPECT_EQ(c.normalize[1]->kind, tsfuse::NormalizeStage::Kind::LogSoftmax);
  EXPECT_EQ(c.stageTexts()[1], "log_softmax(dim=-1)");
  EXPECT_NE(errorOf([&] {
              tsfuse::Sweep::parse(kSq, {stage0, "softmax(dim=1)"});
            }).find("normalizes"),
            std::string::npos);
}

}  // namespace

}  // namespace ops_chain_normalize_test
