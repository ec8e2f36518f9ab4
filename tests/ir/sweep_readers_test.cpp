// IR-string tests of the sweep of a fused reduction's readers (passes/regions/sweep_readers.h):
// plain reductions of the value and fused reductions over it become one tsfuse::reduce_sweep
// through the whole pipeline (kernel regression's numerator and denominator), a fused reader's
// epilogue that reads another reader's result runs after the sweep, with named negative cases.
// Each rewritten graph computes what the original does.
#include "ir_util.h"

namespace ir_sweep_readers_test {

namespace {

using namespace tsfuse_test;

// graph(%x [N, 1, D], %y [M, D], %b [M]): the Gaussian weights %k = exp(-2 |x_i - y_j|^2) [N, M],
// then `body`.
std::shared_ptr<Graph> weights(const std::string& body) {
  return squaredDistancesThen(R"IR(
  %e : Tensor = aten::mul(%d, %mtwo)
  %k : Tensor = aten::exp(%e)
)IR" + body,
                              R"IR(
  %dims0 : int[] = prim::Constant[value=[0]]()
  %mtwo : float = prim::Constant[value=-2.]()
)IR");
}

std::vector<c10::IValue> points(uint64_t seed) {
  Gen g(seed);
  return {g.tensor({37, 1, 3}, at::kFloat), g.tensor({29, 3}, at::kFloat), g.tensor({29}, at::kFloat)};
}

std::vector<std::string> stagesOf(torch::jit::Node* n) {
  std::vector<std::string> out;
  for (const auto& s : constInput(n, 2).toListRef()) out.push_back(s.toStringRef());
  return out;
}

// Nadaraya-Watson: (k[:, :, None] * y[None]).sum(1) / k.sum(1, keepdim=True).
const char* kRegression = R"IR(
  %ku : Tensor = aten::unsqueeze(%k, %two)
  %yu : Tensor = aten::unsqueeze(%y, %zero)
  %p : Tensor = aten::mul(%ku, %yu)
  %num : Tensor = aten::sum(%p, %dims1, %false, %none)
  %den : Tensor = aten::sum(%k, %dims1, %true, %none)
  %r : Tensor = aten::div(%num, %den)
  return (%r)
)IR";

TEST(SweepReadersIR, KernelRegressionsNumeratorAndDenominatorAreOneSweep) {
  Piped p = pipeline(weights(kRegression));
  EXPECT_TRUE(fileCheck(p.r.ir, [](FileCheck& fc) {
    fc.check_count("tsfuse::reduce_sweep", 1, true)
        ->check("prim::ListUnpack")
        ->check("tsfuse::pairwise")
        ->check_not("aten::exp")
        ->check_not("aten::sum")
        ->check_not("tsfuse::reduce(");
  })) << p.r.dump();
  auto sw = findNodes(p.g, "tsfuse::reduce_sweep");
  ASSERT_EQ(sw.size(), 1u);
  const std::vector<std::string> stages = stagesOf(sw[0]);
  ASSERT_EQ(stages.size(), 3u) << p.r.ir;
  // In graph order: the denominator, then the fused reduction that became the division.
  EXPECT_EQ(stages[1], "sum(dim=[1], keepdim=True)");
  EXPECT_EQ(stages[2], "fused(v1: mul($0, $1); $0 = value.unsqueeze(2)) |> sum(dim=[1], keepdim=False)");
  // The division, which reads the denominator, runs after the sweep.
  auto maps = findNodes(p.g, "tsfuse::pairwise");
  ASSERT_EQ(maps.size(), 1u);
  EXPECT_EQ(constInput(maps[0], 1).toStringRef(), "v1: div($0, $1)");
  for (uint64_t seed : {1, 2}) EXPECT_TRUE(sameOutputs(p.ref, p.g, points(seed), /*exact=*/false));
}

TEST(SweepReadersIR, TwoFusedReadersAndNoPlainOneAreOneSweep) {
  Piped p = pipeline(weights(R"IR(
  %ku : Tensor = aten::unsqueeze(%k, %two)
  %yu : Tensor = aten::unsqueeze(%y, %zero)
  %p : Tensor = aten::mul(%ku, %yu)
  %num : Tensor = aten::sum(%p, %dims1, %false, %none)
  %kb : Tensor = aten::mul(%k, %b)
  %wb : Tensor = aten::amax(%kb, %dims1, %false)
  return (%num, %wb)
)IR"));
  auto sw = findNodes(p.g, "tsfuse::reduce_sweep");
  ASSERT_EQ(sw.size(), 1u) << p.r.dump();
  const std::vector<std::string> stages = stagesOf(sw[0]);
  ASSERT_EQ(stages.size(), 3u);
  EXPECT_EQ(stages[2], "fused(v1: mul($0, $1); $0 = value) |> amax(dim=[1], keepdim=False)");
  EXPECT_TRUE(findNodes(p.g, "tsfuse::reduce").empty()) << p.r.ir;
  for (uint64_t seed : {3, 4}) EXPECT_TRUE(sameOutputs(p.ref, p.g, points(seed), /*exact=*/false));
}

TEST(SweepReadersIR, ReadersKeepTheirReductionsWhateverTheUseOrder) {
  // %k's first use is the later reader's unsqueeze; the earlier reader's operand list, made by
  // fuse_broadcast_reduce, is its last use. Branches follow the graph's order.
  Piped p = pipeline(weights(R"IR(
  %ku : Tensor = aten::unsqueeze(%k, %two)
  %kb : Tensor = aten::mul(%k, %b)
  %wb : Tensor = aten::amax(%kb, %dims1, %false)
  %yu : Tensor = aten::unsqueeze(%y, %zero)
  %p : Tensor = aten::mul(%ku, %yu)
  %num : Tensor = aten::sum(%p, %dims1, %false, %none)
  return (%wb, %num)
)IR"));
  auto sw = findNodes(p.g, "tsfuse::reduce_sweep");
  ASSERT_EQ(sw.size(), 1u) << p.r.dump();
  const std::vector<std::string> stages = stagesOf(sw[0]);
  ASSERT_EQ(stages.size(), 3u);
  EXPECT_EQ(stages[1], "fused(v1: mul($0, $1); $0 = value) |> amax(dim=[1], keepdim=False)");
  EXPECT_EQ(stages[2], "fused(v1: mul($0, $1); $0 = value.unsqueeze(2)) |> sum(dim=[1], keepdim=False)");
  EXPECT_TRUE(sameOutputs(p.ref, p.g, points(7), /*exact=*/false));
}

TEST(SweepReadersIR, NegativeAFusedReaderOfAnotherReadersResultIsNotSwept) {
  // (k * k.sum(1, keepdim=True)).sum(0): the second reader's operand is the first's result.
  Piped p = pipeline(weights(R"IR(
  %den : Tensor = aten::sum(%k, %dims1, %true, %none)
  %p : Tensor = aten::mul(%k, %den)
  %r : Tensor = aten::sum(%p, %dims0, %false, %none)
  return (%r)
)IR"));
  EXPECT_TRUE(findNodes(p.g, "tsfuse::reduce_sweep").empty()) << p.r.ir;
  EXPECT_TRUE(p.r.rejectedWith("reads another reader's result")) << p.r.dump();
  EXPECT_TRUE(sameOutputs(p.ref, p.g, points(5), /*exact=*/false));
}

TEST(SweepReadersIR, NegativeAValueAlsoReturnedIsNotSwept) {
  std::string body = kRegression;
  body.replace(body.find("return (%r)"), 11, "return (%r, %k)");
  Piped p = pipeline(weights(body));
  EXPECT_TRUE(findNodes(p.g, "tsfuse::reduce_sweep").empty()) << p.r.ir;
  EXPECT_TRUE(p.r.rejectedWith("is also used by")) << p.r.dump();
  EXPECT_TRUE(sameOutputs(p.ref, p.g, points(6), /*exact=*/false));
}

}  // namespace

}  // namespace ir_sweep_readers_test
