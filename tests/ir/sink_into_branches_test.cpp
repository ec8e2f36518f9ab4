// IR-string tests of sink_into_branches (passes/sink_into_branches.cpp): an elementwise value that
// only reductions inside if-branches read (elsewhere its sizes alone) is computed in the branch,
// where the reduction fuses with it, and its sizes come from tsfuse::shape_of; named negative
// cases keep it where it is: a value also read outside the branch, a reduction in a loop body, an
// operand written before the branch. Before/after through the interpreter, both branches taken.
#include "ir_util.h"

namespace ir_sink_into_branches_test {

namespace {

using namespace tsfuse_test;

// |x - y| and its sizes' guard, the branch reducing it, then `tail` (returns).
std::shared_ptr<Graph> guarded(const std::string& before, const std::string& branch, const std::string& tail = "") {
  return graphWithConstants("%x : Tensor, %y : Tensor",
                            "  %d : Tensor = aten::sub(%x, %y, %one)\n"
                            "  %s : Tensor = aten::abs(%d)\n" +
                                before +
                                "  %n : int = aten::size(%s, %zero)\n"
                                "  %c : bool = aten::eq(%n, %zero)\n"
                                "  %r : Tensor = prim::If(%c)\n"
                                "    block0():\n"
                                "      %z : Tensor = aten::sum(%y, %dims0, %false, %none)\n"
                                "      -> (%z)\n"
                                "    block1():\n" +
                                branch + tail,
                            "  %dims0 : int[] = prim::Constant[value=[0]]()\n");
}

const std::string kMax = "      %m : Tensor = aten::amax(%s, %dims0, %false)\n      -> (%m)\n";

std::vector<c10::IValue> inputs(uint64_t seed, int64_t n) {
  Gen g(seed);
  return {g.tensor({n, 1}, at::kFloat), g.tensor({1, 7}, at::kFloat)};
}

TEST(SinkIntoBranchesIR, AReductionInABranchFusesWithTheValue) {
  Piped p = pipeline(guarded("", kMax, "  return (%r)\n"));
  EXPECT_EQ(p.r.rewritesBy("sink_into_branches"), 1) << p.r.dump();
  EXPECT_TRUE(fileCheck(p.r.ir, [](FileCheck& fc) {
    fc.check("tsfuse::shape_of(")->check("prim::If")->check("tsfuse::reduce(")->check_not("aten::amax");
  })) << p.r.ir;
  EXPECT_TRUE(findNodes(p.g, "aten::abs").empty()) << p.r.ir;
  EXPECT_TRUE(sameOutputs(p.ref, p.g, inputs(1, 9)));
  EXPECT_TRUE(sameOutputs(p.ref, p.g, inputs(2, 0)));  // the other branch
}

TEST(SinkIntoBranchesIR, NegativeValueAlsoReadOutsideTheBranch) {
  Piped p = pipeline(guarded("", kMax, "  %t : Tensor = aten::mul(%s, %s)\n  return (%r, %t)\n"));
  EXPECT_EQ(p.r.rewritesBy("sink_into_branches"), 0) << p.r.dump();
  EXPECT_TRUE(sameOutputs(p.ref, p.g, inputs(3, 9)));
}

TEST(SinkIntoBranchesIR, NegativeReductionInALoopBody) {
  Piped p = pipeline(graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %d : Tensor = aten::sub(%x, %y, %one)
  %s : Tensor = aten::abs(%d)
  %r : Tensor = prim::Loop(%two, %true, %x)
    block0(%i : int, %acc : Tensor):
      %m : Tensor = aten::amax(%s, %dims0, %false)
      %a : Tensor = aten::add(%acc, %m, %one)
      -> (%true, %a)
  return (%r)
)IR",
                                        "  %dims0 : int[] = prim::Constant[value=[0]]()\n"));
  EXPECT_EQ(p.r.rewritesBy("sink_into_branches"), 0) << p.r.dump();
  EXPECT_TRUE(p.r.rejectedWith("runs in a loop body")) << p.r.dump();
  EXPECT_TRUE(sameOutputs(p.ref, p.g, inputs(4, 9)));
}

TEST(SinkIntoBranchesIR, NegativeOperandWrittenBeforeTheBranch) {
  Piped p = pipeline(guarded("  %w : Tensor = aten::add_(%y, %one, %one)\n", kMax, "  return (%r)\n"));
  EXPECT_EQ(p.r.rewritesBy("sink_into_branches"), 0) << p.r.dump();
  EXPECT_TRUE(p.r.rejectedWith("written by an in-place op")) << p.r.dump();
  EXPECT_TRUE(sameOutputs(p.ref, p.g, inputs(5, 9)));
}

}  // namespace

}  // namespace ir_sink_into_branches_test
