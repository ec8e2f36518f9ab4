// IR-string tests of chain_fused_reductions (passes/chain_fused_reductions.cpp): a fused reduction
// over a fused reduction's value becomes one tsfuse::reduce_chain whose last stage is fused (the
// Gaussian kernel product with a weight matrix, through aten::unsqueeze and through sink_views'
// helper; max with indices as the consumer), with named negative cases. Each rewritten graph gives
// the bits of the graph before the pass, in one piece and in many slabs, and the original's values
// (within a sum's rounding).
#include "weighted_distances.h"

#include "kernels/backends/slabs.h"
#include "kernels/runtime/chain.h"
#include "passes/chain_fused_reductions.h"
#include "passes/hoist_into_epilogue.h"
#include "passes/sink_views.h"

namespace ir_chain_fused_reductions_test {

namespace {

using namespace tsfuse_test;

class ChainFusedReductionsIR : public ManySlabs {};

using Chained = Rewritten;

// The fusion passes `fusion` (in order), then chain_fused_reductions.
Chained chain(const std::string& body,
              const std::vector<GraphPass>& fusion = {tsfuse::FuseBroadcastReduce, tsfuse::HoistIntoEpilogue}) {
  return rewriteWeighted(body, fusion, tsfuse::ChainFusedReductions);
}

std::vector<c10::IValue> points(uint64_t seed, int64_t n = 23, at::ScalarType t = at::kFloat) {
  return weightedPoints(seed, n, 17, 5, t);
}

std::vector<std::string> stagesOf(torch::jit::Node* n) {
  std::vector<std::string> out;
  for (const auto& s : constInput(n, 2).toListRef()) out.push_back(s.toStringRef());
  return out;
}

TEST_F(ChainFusedReductionsIR, KernelProductBecomesOneChain) {
  Chained c = chain(kKernelProduct);
  ASSERT_EQ(c.run.rewrites(), 1) << c.run.dump();
  auto nodes = findNodes(c.g, "tsfuse::reduce_chain");
  ASSERT_EQ(nodes.size(), 1u) << c.run.ir;
  EXPECT_EQ(stagesOf(nodes[0]), (std::vector<std::string>{
                                    "sum(dim=[-1], keepdim=False) |> v1: mul($0, -2.0); exp(%0)",
                                    "fused(v1: mul($0, $1); $0 = value.unsqueeze(2)) |> sum(dim=[1], keepdim=False)"}));
  EXPECT_TRUE(fileCheck(c.run.ir, [](FileCheck& fc) {
    fc.check_not("tsfuse::reduce(")->check("tsfuse::reduce_chain(")->check_not("aten::unsqueeze(%d")->check("return");
  }));
  EXPECT_NE(c.run.firstRewrite()->reason.find("never stored"), std::string::npos);
  EXPECT_TRUE(c.sameResults(points(1)));
  EXPECT_TRUE(c.sameResults(points(2, 40, at::kDouble)));
  tsfuse::setChainSlabElements(tsfuse::kSlabElements / 2);  // one piece
  EXPECT_TRUE(c.sameResults(points(3)));
}

TEST_F(ChainFusedReductionsIR, ThroughSinkViewsHelper) {
  Chained c =
      chain(kKernelProductUnsqueezedLast, {tsfuse::SinkViews, tsfuse::FuseBroadcastReduce, tsfuse::HoistIntoEpilogue});
  ASSERT_EQ(c.run.rewrites(), 1) << c.run.dump();
  EXPECT_TRUE(findNodes(c.g, "tsfuse::broadcast_unsqueeze").empty()) << c.run.ir;
  EXPECT_TRUE(findNodes(c.g, "tsfuse::reduce").empty()) << c.run.ir;
  EXPECT_TRUE(c.sameResults(points(4)));
}

TEST_F(ChainFusedReductionsIR, MaxWithIndicesAsTheLastStage) {
  Chained c = chain(R"IR(
  %u : Tensor = aten::unsqueeze(%d, %two)
  %kb : Tensor = aten::mul(%u, %b3)
  %v : Tensor, %i : Tensor = aten::max(%kb, %one, %false)
  return (%v, %i)
)IR");
  ASSERT_EQ(c.run.rewrites(), 1) << c.run.dump();
  auto nodes = findNodes(c.g, "tsfuse::reduce_chain_with_indices");
  ASSERT_EQ(nodes.size(), 1u) << c.run.ir;
  EXPECT_EQ(stagesOf(nodes[0]).back(),
            "fused(v1: mul($0, $1); $0 = value.unsqueeze(2)) |> max(dim=[1], keepdim=False)");
  EXPECT_TRUE(c.sameResults(points(5)));
}

TEST_F(ChainFusedReductionsIR, ASiblingReadByTheEpilogueIsStageZero) {
  // YOLOX's IoU over [N, M, 2] corners: the overlap mask's product and the intersection's, both
  // over dim 2, the second's epilogue reading the first: one chain, the first computed slab by
  // slab as an operand of the second's epilogue.
  auto g = graphWithConstants("%a1 : Tensor, %b1 : Tensor, %a2 : Tensor, %b2 : Tensor", R"IR(
  %tl : Tensor = aten::maximum(%a1, %b1)
  %br : Tensor = aten::minimum(%a2, %b2)
  %lt : Tensor = aten::lt(%tl, %br)
  %f : Tensor = aten::mul(%lt, %two)
  %en : Tensor = aten::prod(%f, %two, %false, %none)
  %wh : Tensor = aten::sub(%br, %tl, %one)
  %inter : Tensor = aten::prod(%wh, %two, %false, %none)
  %iou : Tensor = aten::mul(%inter, %en)
  %q : Tensor = aten::add(%iou, %one, %one)
  return (%q)
)IR");
  auto ref = g->copy();
  PassRun p = runPipelineOn(g);
  auto nodes = findNodes(g, "tsfuse::reduce_chain");
  ASSERT_EQ(nodes.size(), 1u) << p.dump();
  EXPECT_TRUE(findNodes(g, "tsfuse::reduce").empty()) << p.ir;
  const std::vector<std::string> stages = stagesOf(nodes[0]);
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_NE(stages[1].find(" = value) |> prod(dim=[2], keepdim=False) |> v1: mul("), std::string::npos) << stages[1];
  auto inputs = [](uint64_t seed, int64_t n, int64_t m) {
    Gen gen(seed);
    return std::vector<c10::IValue>{gen.tensor({n, 1, 2}, at::kFloat), gen.tensor({m, 2}, at::kFloat),
                                    gen.tensor({n, 1, 2}, at::kFloat), gen.tensor({m, 2}, at::kFloat)};
  };
  EXPECT_TRUE(sameOutputs(ref, g, inputs(7, 40, 33)));  // many slabs
  tsfuse::setChainSlabElements(tsfuse::kSlabElements / 2);
  EXPECT_TRUE(sameOutputs(ref, g, inputs(8, 40, 33)));  // one piece
}

TEST_F(ChainFusedReductionsIR, NegativeValueAlsoReturned) {
  Chained c = chain(R"IR(
  %u : Tensor = aten::unsqueeze(%d, %two)
  %kb : Tensor = aten::mul(%u, %b3)
  %r : Tensor = aten::sum(%kb, %dims1, %false, %none)
  return (%r, %d)
)IR");
  EXPECT_EQ(c.run.rewrites(), 0) << c.run.ir;
  EXPECT_TRUE(c.run.rejectedWith("is also used elsewhere, so it is stored anyway")) << c.run.dump();
}

TEST_F(ChainFusedReductionsIR, NegativeConsumerReducesEveryDim) {
  Chained c = chain(R"IR(
  %u : Tensor = aten::unsqueeze(%d, %two)
  %kb : Tensor = aten::mul(%u, %b3)
  %r : Tensor = aten::sum(%kb, %none)
  return (%r)
)IR");
  EXPECT_EQ(c.run.rewrites(), 0) << c.run.ir;
  EXPECT_TRUE(c.run.rejectedWith("reduces every dim")) << c.run.dump();
}

TEST_F(ChainFusedReductionsIR, NegativeWeightsWrittenInBetween) {
  Chained c = chain(R"IR(
  %w : Tensor = aten::mul_(%y, %mtwo)
  %u : Tensor = aten::unsqueeze(%d, %two)
  %kb : Tensor = aten::mul(%u, %b3)
  %r : Tensor = aten::sum(%kb, %dims1, %false, %none)
  return (%r)
)IR");
  EXPECT_EQ(c.run.rewrites(), 0) << c.run.ir;
  EXPECT_GE(c.run.rejects(), 1) << c.run.dump();
}

}  // namespace

}  // namespace ir_chain_fused_reductions_test
