// IR-string tests of hoist_into_epilogue (passes/hoist_into_epilogue.cpp): the ops a fused op
// computes on an unsqueezed fused reduction's value alone move into that reduction's epilogue (the
// Gaussian kernel product with a weight matrix, through aten::unsqueeze and through sink_views'
// helper; an existing epilogue; a map consumer; a compare that makes the value bool), with named
// negative cases (a map over a max with indices is fold_indices_epilogue's). Each
// rewritten graph gives the bits of the fused graph before the pass, and the original's values
// (within a sum's rounding: tsfuse folds the weighted sum in its own order).
#include "weighted_distances.h"

#include "passes/fuse_broadcast_reduce.h"
#include "passes/fuse_pairwise.h"
#include "passes/hoist_into_epilogue.h"
#include "passes/sink_views.h"

namespace ir_hoist_into_epilogue_test {

namespace {

using namespace tsfuse_test;

std::vector<c10::IValue> points(uint64_t seed, at::ScalarType t = at::kFloat) {
  return weightedPoints(seed, 9, 7, 16, t);
}

using Hoisted = Rewritten;

// The fusion passes `fusion` (in order), then hoist_into_epilogue.
Hoisted hoist(const std::string& body, const std::vector<GraphPass>& fusion = {tsfuse::FuseBroadcastReduce}) {
  return rewriteWeighted(body, fusion, tsfuse::HoistIntoEpilogue);
}

std::string epilogueOf(torch::jit::Node* n) {
  const c10::IValue e = constInput(n, 6);
  return e.isNone() ? "" : e.toStringRef();
}

// Both reductions' expressions: the first (the distances) and the second (the weighted sum).
void expectReductions(const Hoisted& h, const std::string& epilogue, const std::string& consumer) {
  auto r = findNodes(h.g, "tsfuse::reduce");
  ASSERT_EQ(r.size(), 2u) << h.run.dump();
  EXPECT_EQ(epilogueOf(r[0]), epilogue);
  EXPECT_EQ(exprOf(r[1]), consumer);
}

TEST(HoistIntoEpilogueIR, KernelProductsExpMovesIntoTheDistancesEpilogue) {
  Hoisted h = hoist(kKernelProduct);
  ASSERT_EQ(h.run.rewrites(), 1) << h.run.dump();
  expectReductions(h, "v1: mul($0, -2.0); exp(%0)", "v1: mul($0, $1)");
  EXPECT_TRUE(fileCheck(h.run.ir, [](FileCheck& fc) {
    fc.check("tsfuse::reduce(")->check("aten::unsqueeze")->check("tsfuse::reduce(")->check_not("aten::exp");
  }));
  EXPECT_NE(h.run.firstRewrite()->reason.find("once per reduced value"), std::string::npos);
  EXPECT_TRUE(h.sameResults(points(1)));
  EXPECT_TRUE(h.sameResults(points(2, at::kDouble)));
}

TEST(HoistIntoEpilogueIR, ThroughSinkViewsHelper) {
  // The unsqueeze after the exp: sink_views pushes it to %d through tsfuse::broadcast_unsqueeze.
  Hoisted h = hoist(kKernelProductUnsqueezedLast, {tsfuse::SinkViews, tsfuse::FuseBroadcastReduce});
  ASSERT_EQ(h.run.rewrites(), 1) << h.run.dump();
  expectReductions(h, "v1: mul($0, -2.0); exp(%0)", "v1: mul($0, $1)");
  EXPECT_EQ(findNodes(h.g, "tsfuse::broadcast_unsqueeze").size(), 1u);
  EXPECT_TRUE(h.sameResults(points(3)));
}

TEST(HoistIntoEpilogueIR, JoinsAnExistingEpilogueAndAMapConsumer) {
  // sqrt is already the distances' epilogue (its one reader); the map consumer is a pairwise op.
  Hoisted h = hoist(R"IR(
  %l : Tensor = aten::sqrt(%d)
  %u : Tensor = aten::unsqueeze(%l, %two)
  %e : Tensor = aten::mul(%u, %mtwo)
  %k : Tensor = aten::exp(%e)
  %kb : Tensor = aten::mul(%k, %b3)
  %kc : Tensor = aten::add(%kb, %b3, %one)
  return (%kc)
)IR",
                    {tsfuse::FuseBroadcastReduce, tsfuse::FusePairwise});
  ASSERT_EQ(h.run.rewrites(), 1) << h.run.dump();
  auto r = findNodes(h.g, "tsfuse::reduce"), p = findNodes(h.g, "tsfuse::pairwise");
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(epilogueOf(r[0]), "v1: sqrt($0); mul(%0, -2.0); exp(%1)");
  EXPECT_EQ(exprOf(p[0]), "v1: mul($0, $1); add(%0, $1)");
  EXPECT_TRUE(h.sameResults(points(4)));
}

TEST(HoistIntoEpilogueIR, ACompareMakesTheStoredValueBool) {
  Hoisted h = hoist(R"IR(
  %u : Tensor = aten::unsqueeze(%d, %two)
  %c : Tensor = aten::lt(%u, %half)
  %kb : Tensor = aten::mul(%c, %b3)
  %r : Tensor = aten::sum(%kb, %dims1, %false, %none)
  return (%r)
)IR");
  ASSERT_EQ(h.run.rewrites(), 1) << h.run.dump();
  expectReductions(h, "v1: lt($0, 0.5)", "v1: mul($0, $1)");
  EXPECT_TRUE(h.sameResults(points(5)));
}

TEST(HoistIntoEpilogueIR, NegativeOperandAlsoReadWithOthers) {
  Hoisted h = hoist(R"IR(
  %u : Tensor = aten::unsqueeze(%d, %two)
  %k : Tensor = aten::exp(%u)
  %kb : Tensor = aten::mul(%k, %b3)
  %ku : Tensor = aten::add(%kb, %u, %one)
  %r : Tensor = aten::sum(%ku, %dims1, %false, %none)
  return (%r)
)IR");
  EXPECT_EQ(h.run.rewrites(), 0);
  EXPECT_TRUE(h.run.rejectedWith("also read by ops that read other operands")) << h.run.dump();
  expectReductions(h, "", "v1: exp($0); mul(%0, $1); add(%1, $0)");
}

TEST(HoistIntoEpilogueIR, NegativeTwoValuesReadByTheRest) {
  Hoisted h = hoist(R"IR(
  %u : Tensor = aten::unsqueeze(%d, %two)
  %k : Tensor = aten::exp(%u)
  %n : Tensor = aten::mul(%u, %mtwo)
  %kb : Tensor = aten::mul(%k, %b3)
  %nb : Tensor = aten::mul(%n, %b3)
  %s : Tensor = aten::add(%kb, %nb, %one)
  %r : Tensor = aten::sum(%s, %dims1, %false, %none)
  return (%r)
)IR");
  EXPECT_EQ(h.run.rewrites(), 0);
  EXPECT_TRUE(h.run.rejectedWith("several values")) << h.run.dump();
}

TEST(HoistIntoEpilogueIR, NegativeValueAlsoReturnedOrSelected) {
  // %d is also returned: the stored value must stay the distances. A select is no broadcast
  // (moving ops before it would compute them on more elements, not fewer): not a candidate.
  for (const char* body : {R"IR(
  %u : Tensor = aten::unsqueeze(%d, %two)
  %k : Tensor = aten::exp(%u)
  %kb : Tensor = aten::mul(%k, %b3)
  %r : Tensor = aten::sum(%kb, %dims1, %false, %none)
  return (%r, %d)
)IR",
                           R"IR(
  %u : Tensor = aten::select(%d, %one, %zero)
  %k : Tensor = aten::exp(%u)
  %r : Tensor = aten::sum(%k, %dimsm1, %false, %none)
  return (%r)
)IR"}) {
    Hoisted h = hoist(body);
    EXPECT_FALSE(h.run.changed) << h.run.dump();
    EXPECT_TRUE(h.run.events.empty()) << h.run.dump();
    EXPECT_TRUE(h.sameResults(points(6)));
  }
}

}  // namespace

}  // namespace ir_hoist_into_epilogue_test
