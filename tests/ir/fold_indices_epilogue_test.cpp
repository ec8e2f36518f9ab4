// IR-string tests of fold_indices_epilogue (passes/fold_indices_epilogue.cpp): a fused elementwise
// op over the values and indices of a max with indices becomes that op's epilogue, whose value
// replaces the indices (anchor matching's masked_fill form and the Matcher-style
// where/full_like form), with named negative cases. Each rewritten graph gives the bits of the
// fused graph before the pass and of the original graph.
#include "weighted_distances.h"

#include "passes/fold_indices_epilogue.h"
#include "passes/fuse_broadcast_reduce.h"
#include "passes/fuse_pairwise.h"

namespace ir_fold_indices_epilogue_test {

namespace {

using namespace tsfuse_test;

// The squared-difference max over D of x [N, 1, 3] and y [M, 3]: (%v, %i) [N, M], then `tail`.
Rewritten fold(const std::string& tail) {
  const std::string body = R"IR(
  %s2 : Tensor = aten::sub(%x, %y, %one)
  %sq : Tensor = aten::mul(%s2, %s2)
  %v : Tensor, %i : Tensor = aten::max(%sq, %two, %false)
)IR" + tail;
  return rewriteWeighted(body, {tsfuse::FuseBroadcastReduce, tsfuse::FusePairwise}, tsfuse::FoldIndicesEpilogue);
}

std::vector<c10::IValue> points(uint64_t seed) { return weightedPoints(seed, 9, 7, 1); }

std::string epilogueOf(torch::jit::Node* n) {
  const c10::IValue e = constInput(n, 5);
  return e.isNone() ? "" : e.toStringRef();
}

TEST(FoldIndicesEpilogueIR, MaskedFillOverValuesAndIndices) {
  Rewritten r = fold(R"IR(
  %m : Tensor = aten::lt(%v, %half)
  %r : Tensor = aten::masked_fill(%i, %m, %m1)
  return (%v, %r)
)IR");
  ASSERT_EQ(r.run.rewrites(), 1) << r.run.dump();
  auto n = findNodes(r.g, "tsfuse::reduce_with_indices");
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(epilogueOf(n[0]), "v1: lt($0, 0.5); masked_fill($1, %0, -1)");
  EXPECT_TRUE(fileCheck(r.run.ir, [](FileCheck& fc) {
    fc.check("tsfuse::reduce_with_indices")->check_not("tsfuse::pairwise")->check_not("aten::masked_fill");
  }));
  EXPECT_TRUE(r.sameResults(points(1)));
  EXPECT_TRUE(r.sameResults(points(2)));
}

TEST(FoldIndicesEpilogueIR, MatcherWhereOverAFullLikeOfTheIndices) {
  // Matcher style (examples/detection_models.py): torch.where(below, torch.full_like(matches, -1), matches).
  Rewritten r = fold(R"IR(
  %m : Tensor = aten::lt(%v, %half)
  %f : Tensor = aten::full_like(%i, %m1, %none, %none, %none, %none, %none)
  %r : Tensor = aten::where(%m, %f, %i)
  return (%v, %r)
)IR");
  ASSERT_EQ(r.run.rewrites(), 1) << r.run.dump();
  auto n = findNodes(r.g, "tsfuse::reduce_with_indices");
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(epilogueOf(n[0]), "v1: lt($0, 0.5); full_like($1, -1); where(%0, %1, $1)");
  EXPECT_TRUE(fileCheck(r.run.ir, [](FileCheck& fc) {
    fc.check("tsfuse::reduce_with_indices")->check_not("aten::full_like")->check_not("tsfuse::pairwise");
  }));
  EXPECT_TRUE(r.sameResults(points(3)));
}

TEST(FoldIndicesEpilogueIR, NegativeIndicesAlsoReturned) {
  Rewritten r = fold(R"IR(
  %m : Tensor = aten::lt(%v, %half)
  %r : Tensor = aten::masked_fill(%i, %m, %m1)
  return (%r, %i)
)IR");
  EXPECT_EQ(r.run.rewrites(), 0);
  EXPECT_TRUE(r.run.rejectedWith("are also read by")) << r.run.dump();
  EXPECT_EQ(findNodes(r.g, "tsfuse::pairwise").size(), 1u);
  EXPECT_TRUE(r.sameResults(points(4)));
}

TEST(FoldIndicesEpilogueIR, NegativeReadsAnotherTensor) {
  // The threshold is a tensor of the graph: the epilogue would need it as an operand.
  Rewritten r = fold(R"IR(
  %t : Tensor = aten::select(%b, %one, %zero)
  %m : Tensor = aten::lt(%v, %t)
  %r : Tensor = aten::masked_fill(%i, %m, %m1)
  return (%v, %r)
)IR");
  EXPECT_EQ(r.run.rewrites(), 0);
  EXPECT_TRUE(r.run.rejectedWith("which is not the values or the indices")) << r.run.dump();
  EXPECT_TRUE(r.sameResults(points(5)));
}

}  // namespace

}  // namespace ir_fold_indices_epilogue_test
