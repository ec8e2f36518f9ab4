// IR-string tests of a reduction's epilogue when the ops after it read its value, or each other,
// more than once (passes/regions/epilogue.cpp planEpilogue): the longest run of elementwise ops whose values
// nothing else reads joins the fused reduction, with the elementwise producers of its operands
// that only it reads; named negative cases keep the ops outside when the reduced value or an
// intermediate is read by something else. Before/after through the
// interpreter, values, dtypes and strides compared.
#include "ir_util.h"

namespace ir_epilogue_graph_test {

namespace {

using namespace tsfuse_test;

std::shared_ptr<Graph> distancesThen(const std::string& tail) {
  return graphWithConstants("%a : Tensor, %b : Tensor",
                            "  %s : Tensor = aten::sub(%a, %b, %one)\n  %ab : Tensor = aten::abs(%s)\n"
                            "  %d : Tensor = aten::sum(%ab, %dims1, %false, %none)\n" +
                                tail,
                            "  %half : float = prim::Constant[value=0.5]()\n");
}

std::vector<c10::IValue> inputs(uint64_t seed) {
  Gen g(seed);
  return {g.tensor({6, 1}, at::kFloat), g.tensor({1, 5}, at::kFloat)};
}

std::string epilogueOf(torch::jit::Node* n) {
  const c10::IValue e = constInput(n, 6);
  return e.isNone() ? "" : e.toStringRef();
}

// Runs the pipeline on distancesThen(tail): one tsfuse::reduce with `epilogue` (empty: none),
// and the original's outputs. Returns the rewritten graph.
std::shared_ptr<Graph> expectEpilogue(const std::string& tail, const std::string& epilogue, uint64_t seed) {
  auto g = distancesThen(tail);
  auto ref = g->copy();
  PassRun p = runPipelineOn(g);
  auto r = findNodes(g, "tsfuse::reduce");
  EXPECT_EQ(r.size(), 1u) << p.dump();
  if (r.size() == 1) EXPECT_EQ(epilogueOf(r[0]), epilogue) << p.dump();
  EXPECT_TRUE(sameOutputs(ref, g, inputs(seed)));
  return g;
}

TEST(EpilogueGraphIR, ValueReadTwiceJoinsTheReduction) {
  // d * d + d: the reduced value is read by mul (twice) and by add.
  auto g = expectEpilogue("  %m : Tensor = aten::mul(%d, %d)\n  %e : Tensor = aten::add(%m, %d, %one)\n  return (%e)\n",
                          "v1: mul($0, $0); add(%0, $0)", 1);
  EXPECT_TRUE(findNodes(g, "aten::mul").empty() && findNodes(g, "aten::add").empty());
}

TEST(EpilogueGraphIR, ThresholdWriteWithAnExtraOperand) {
  // where(d < 0.5, bs, d) with bs = b.sum(1) computed between: the extra is read as $1.
  auto g = expectEpilogue(
      "  %bs : Tensor = aten::sum(%b, %dims1, %false, %none)\n  %m : Tensor = aten::lt(%d, %half)\n"
      "  %w : Tensor = aten::where(%m, %bs, %d)\n  return (%w)\n",
      "v1: lt($0, 0.5); where(%0, $1, $0)", 2);
  EXPECT_TRUE(findNodes(g, "aten::where").empty());
}

TEST(EpilogueGraphIR, AnOperandOnlyTheEpilogueReadsJoinsIt) {
  // The union's shape: q = sa * sa is read by the epilogue alone, so it is computed there, from
  // sa, instead of being stored (as monai's area1[:, None] + area2 - inter).
  auto g = expectEpilogue(
      "  %sa : Tensor = aten::sum(%a, %dims1, %false, %none)\n  %q : Tensor = aten::mul(%sa, %sa)\n"
      "  %u : Tensor = aten::sub(%q, %d, %one)\n  return (%u)\n",
      "v1: mul($1, $1); sub(%0, $0)", 5);
  EXPECT_TRUE(findNodes(g, "aten::mul").empty());
}

TEST(EpilogueGraphIR, NegativeReducedValueAlsoReturned) {
  expectEpilogue("  %m : Tensor = aten::mul(%d, %d)\n  return (%m, %d)\n", "", 3);
}

TEST(EpilogueGraphIR, NegativeIntermediateAlsoReturnedKeepsTheLongestClosedRun) {
  // exp(d) is closed (only its value leaves), mask = exp(d) < 0.5 is returned too, so the
  // where() over both cannot join: the epilogue stops at exp.
  expectEpilogue(
      "  %x : Tensor = aten::exp(%d)\n  %m : Tensor = aten::lt(%x, %half)\n"
      "  %w : Tensor = aten::where(%m, %half, %x)\n  return (%w, %m)\n",
      "v1: exp($0)", 4);
}

TEST(EpilogueGraphIR, ALaterReductionOfHigherRankHostsTheTail) {
  // YOLOX's IoU: an [M] product p1 and an [N, M] product p2 (rank >= 2: it reduces dim 2), then
  // p2 / (p1 + p2). p1 comes first but its value is read broadcast: the tail is p2's epilogue, so
  // no [N, M] value is stored (as p1's epilogue, p2 would be).
  auto g = graphWithConstants("%a : Tensor, %b : Tensor, %c : Tensor, %d : Tensor", R"IR(
  %s1 : Tensor = aten::sub(%a, %b, %one)
  %p1 : Tensor = aten::sum(%s1, %dims1, %false, %none)
  %s2 : Tensor = aten::sub(%c, %d, %one)
  %p2 : Tensor = aten::prod(%s2, %two, %false, %none)
  %q : Tensor = aten::add(%p1, %p2, %one)
  %r : Tensor = aten::div(%p2, %q)
  return (%r)
)IR");
  auto ref = g->copy();
  PassRun p = runPipelineOn(g);
  auto r = findNodes(g, "tsfuse::reduce");
  ASSERT_EQ(r.size(), 2u) << p.dump();
  for (torch::jit::Node* n : r) {
    const bool prod = constInput(n, 2).toStringRef() == "prod";
    EXPECT_EQ(epilogueOf(n), prod ? "v1: add($1, $0); div($0, %0)" : "") << p.dump();
  }
  Gen gen(6);
  EXPECT_TRUE(sameOutputs(ref, g,
                          {gen.tensor({5, 3}, at::kFloat), gen.tensor({1, 3}, at::kFloat),
                           gen.tensor({4, 1, 2}, at::kFloat), gen.tensor({5, 2}, at::kFloat)}));
}

TEST(EpilogueGraphIR, ALaterReductionWithIndicesHostsNothing) {
  // Fuzzer seed 8151, program 212: the later reduction the walk meets is a min(dim) with values
  // and indices (two outputs, of rank >= 2 here). It hosts no epilogue, so d's takes the add.
  auto g = expectEpilogue(
      "  %e : Tensor = aten::mul(%a, %b)\n  %mv : Tensor, %mi : Tensor = aten::min(%e, %one, %true)\n"
      "  %w : Tensor = aten::add(%d, %mv, %one)\n  return (%w, %mi)\n",
      "v1: add($0, $1)", 7);
  EXPECT_EQ(findNodes(g, "tsfuse::reduce_with_indices").size(), 1u);
}

}  // namespace

}  // namespace ir_epilogue_graph_test
