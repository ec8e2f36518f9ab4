// IR-string tests of what the passes must NOT fuse (or must fuse only partly), each named after
// the case: shared intermediates, single ops, non-constant scalars, in-place writes, control flow,
// reductions of shared values, shapes known not to broadcast, and shapes that do not broadcast
// at run time (the fused graph raises eager's error).
#include "ir_util.h"

namespace ir_negative_test {

namespace {

using namespace tsfuse_test;

std::shared_ptr<Graph> graphOf(const std::string& sig, const std::string& body) {
  return graphWithConstants(sig, body);
}

std::vector<c10::IValue> twoInputs(uint64_t seed) {
  Gen g(seed);
  return {g.tensor({4, 1}, at::kFloat), g.tensor({1, 5}, at::kFloat)};
}

TEST(NegativeIR, IntermediateUsedElsewhereStaysAnOperand) {
  auto g = graphOf("%a : Tensor, %b : Tensor", R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %m : Tensor = aten::mul(%d, %a)
  return (%m, %s)
)IR");
  auto ref = g->copy();
  PassRun r = runPairwise(g);
  EXPECT_TRUE(r.changed) << r.dump();
  ASSERT_EQ(r.rewrites(), 1) << r.dump();
  // The shared %s is computed once, by the original sub, and feeds the fused op.
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check_count("aten::sub", 1, true)->check_count("tsfuse::pairwise", 1, true)->check_not("aten::abs");
  }));
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("aten::abs")->check_not("aten::mul"); }));
  auto fused = findNodes(g, "tsfuse::pairwise");
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(exprOf(fused[0]), "v1: abs($0); mul(%0, $1)");
  torch::jit::Node* list = fused[0]->input(0)->node();
  ASSERT_EQ(list->inputs().size(), 2u);
  EXPECT_EQ(list->input(0)->node()->kind(), c10::aten::sub);
  EXPECT_NE(r.firstRewrite()->reason.find("is also used outside the region"), std::string::npos)
      << r.firstRewrite()->reason;
  EXPECT_TRUE(sameOutputs(ref, g, twoInputs(1)));
}

TEST(NegativeIR, SingleElementwiseOpIsNotRewritten) {
  auto g = graphOf("%a : Tensor, %b : Tensor", R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %m : Tensor = aten::matmul(%s, %b)
  %e : Tensor = aten::exp(%m)
  return (%e)
)IR");
  PassRun r = runPairwise(g);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_TRUE(r.events.empty()) << r.dump();  // a single op is not even a candidate
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("aten::sub")->check("aten::matmul")->check("aten::exp")->check_not("tsfuse::");
  }));
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("tsfuse::"); }));
}

TEST(NegativeIR, NonConstantAlphaStaysUnfused) {
  // A runtime alpha is not an operand (sub_alpha takes a constant); the runtime number %k that
  // mul reads is: abs and mul fuse, sub stays.
  auto g = graphOf("%a : Tensor, %b : Tensor, %k : int", R"IR(
  %s : Tensor = aten::sub(%a, %b, %k)
  %d : Tensor = aten::abs(%s)
  %m : Tensor = aten::mul(%d, %k)
  return (%m)
)IR");
  auto ref = g->copy();
  PassRun r = runPairwise(g);
  EXPECT_EQ(r.rewrites(), 1) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("aten::sub(%a, %b, %k)")->check("tsfuse::wrapped_number(%k)")->check("tsfuse::pairwise");
  }));
  auto fused = findNodes(g, "tsfuse::pairwise");
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(exprOf(fused[0]), "v1: abs($0); mul(%0, $1)");
  auto in = twoInputs(2);
  in.push_back(c10::IValue(int64_t(3)));
  EXPECT_TRUE(sameOutputs(ref, g, in));
}

TEST(NegativeIR, InPlaceWriteToAnOperandAfterItsUseRejectsTheRegion) {
  auto g = graphOf("%a : Tensor, %b : Tensor", R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %u : Tensor = aten::add_(%a, %one, %one)
  %m : Tensor = aten::mul(%d, %b)
  return (%m, %u)
)IR");
  auto ref = g->copy();
  PassRun r = runPairwise(g);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_EQ(r.rewrites(), 0) << r.dump();
  EXPECT_TRUE(r.rejectedWith("in-place")) << r.dump();
  EXPECT_TRUE(r.rejectedWith("%a")) << r.dump();
  // Nothing moved across the add_: sub and abs still read %a before it.
  EXPECT_TRUE(fileCheck(
      r.ir, [](FileCheck& fc) { fc.check("aten::sub")->check("aten::abs")->check("aten::add_")->check("aten::mul"); }));
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("tsfuse::"); }));
  EXPECT_TRUE(sameOutputs(ref, g, twoInputs(4)));
}

TEST(NegativeIR, InPlaceWriteToTheTensorAViewCameFromRejectsTheRegion) {
  auto g = graphOf("%a : Tensor, %b : Tensor", R"IR(
  %c : Tensor[] = aten::chunk(%a, %two, %one)
  %x : Tensor, %y : Tensor = prim::ListUnpack(%c)
  %s : Tensor = aten::sub(%x, %y, %one)
  %u : Tensor = aten::mul_(%a, %two)
  %d : Tensor = aten::abs(%s)
  %m : Tensor = aten::mul(%d, %b)
  return (%m)
)IR");
  auto ref = g->copy();
  PassRun r = runPairwise(g);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_TRUE(r.rejectedWith("in-place")) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("aten::sub")->check("aten::mul_")->check("aten::abs"); }));
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("tsfuse::"); }));
  Gen gen(5);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({4, 2}, at::kFloat), gen.tensor({1, 3, 1, 1}, at::kFloat)}));
}

const char* kIf = R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %r : Tensor = prim::If(%c)
    block0():
      %x : Tensor = aten::abs(%s)
      %y : Tensor = aten::mul(%x, %x)
      -> (%y)
    block1():
      %z : Tensor = aten::neg(%a)
      -> (%z)
  %t : Tensor = aten::mul(%r, %a)
  %u : Tensor = aten::add(%t, %b, %one)
  return (%u)
)IR";

TEST(NegativeIR, ControlFlowFusesOnlyWithinABlock) {
  auto g = graphOf("%a : Tensor, %b : Tensor, %c : bool", kIf);
  auto ref = g->copy();
  PassRun r = runPairwise(g);
  EXPECT_TRUE(r.changed) << r.dump();
  EXPECT_EQ(r.rewrites(), 2) << r.dump();
  // %s has a single use, inside block0, yet the sub stays outside the If; block1's lone neg stays.
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("aten::sub")
        ->check("prim::If")
        ->check("block0")
        ->check("tsfuse::pairwise")
        ->check("block1")
        ->check("aten::neg")
        ->check("tsfuse::pairwise");
  }));
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check_not("aten::abs")->check_not("aten::add")->check_count("aten::mul", 0, true);
  }));
  auto fused = findNodes(g, "tsfuse::pairwise");
  ASSERT_EQ(fused.size(), 2u);
  torch::jit::Node* inner = nullptr;
  torch::jit::Node* outer = nullptr;
  for (auto* n : fused) (n->owningBlock() == g->block() ? outer : inner) = n;
  ASSERT_TRUE(inner && outer) << r.ir;
  EXPECT_EQ(exprOf(inner), "v1: abs($0); mul(%0, %0)");
  EXPECT_EQ(inner->input(0)->node()->input(0)->node()->kind(), c10::aten::sub);
  EXPECT_EQ(inner->owningBlock()->owningNode()->kind(), c10::prim::If);
  EXPECT_EQ(exprOf(outer), "v1: mul($0, $1); add(%0, $2)");
  EXPECT_EQ(outer->input(0)->node()->input(0)->node()->kind(), c10::prim::If);
  for (bool cond : {true, false}) {
    auto in = twoInputs(6);
    in.push_back(c10::IValue(cond));
    EXPECT_TRUE(sameOutputs(ref, g, in)) << "cond=" << cond;
  }
}

TEST(NegativeIR, ControlFlowReductionOfAValueFromOutsideTheBlockIsNotFused) {
  auto g = graphOf("%a : Tensor, %b : Tensor, %c : bool", R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %r : Tensor = prim::If(%c)
    block0():
      %m : Tensor = aten::sum(%d, %dims1, %false, %none)
      -> (%m)
    block1():
      -> (%a)
  return (%r)
)IR");
  auto ref = g->copy();
  PassRun r = runReduce(g);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_EQ(r.rewrites(), 0);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("aten::sub")->check("aten::abs")->check("prim::If")->check("aten::sum")->check_not("tsfuse::");
  }));
  for (bool cond : {true, false}) {
    auto in = twoInputs(7);
    in.push_back(c10::IValue(cond));
    EXPECT_TRUE(sameOutputs(ref, g, in, /*exact=*/false));
  }
}

// A reduction's epilogue stops at a reader it cannot take, and the rewrite says why, so
// --explain does: here a subtraction with an alpha known only at run time (alpha takes constants
// only; tests/ir/runtime_number_test.cpp has the mission's exp(-d2 / s).sum(1), whose runtime
// divisor it takes, and tests/ir/bound_number_test.cpp the numbers read by value).
TEST(NegativeIR, RuntimeAlphaEndsAnEpilogueAndSaysWhy) {
  auto g = graphOf("%a : Tensor, %b : Tensor, %k : int", R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %m : Tensor = aten::sum(%d, %dims1, %false, %none)
  %n : Tensor = aten::neg(%m)
  %q : Tensor = aten::sub(%n, %m, %k)
  %e : Tensor = aten::exp(%q)
  return (%e)
)IR");
  auto ref = g->copy();
  PassRun r = runReduce(g);
  ASSERT_TRUE(r.changed) << r.dump();
  EXPECT_TRUE(
      fileCheck(r.ir, [](FileCheck& fc) { fc.check("tsfuse::reduce")->check("aten::sub(%")->check("aten::exp"); }));
  const std::string& why = r.firstRewrite()->reason;
  EXPECT_NE(why.find("the epilogue stops at aten::sub: scalar operand %k is not a constant"), std::string::npos) << why;
  auto in = twoInputs(9);
  in.push_back(c10::IValue(int64_t(2)));
  EXPECT_TRUE(sameOutputs(ref, g, in, /*exact=*/false));
}

const char* kSharedReduce = R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %m : Tensor = aten::sum(%d, %dims1, %false, %none)
  return (%m, %d)
)IR";

TEST(NegativeIR, ReductionWhoseInputIsUsedElsewhereIsRejected) {
  auto g = graphOf("%a : Tensor, %b : Tensor", kSharedReduce);
  auto ref = g->copy();
  PassRun r = runReduce(g);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_EQ(r.rewrites(), 0);
  ASSERT_EQ(r.rejects(), 1) << r.dump();
  EXPECT_TRUE(r.rejectedWith("also used elsewhere")) << r.dump();
  EXPECT_EQ(r.events[0].pass, "fuse_broadcast_reduce");
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("aten::abs")->check("aten::sum")->check_not("tsfuse::"); }));
  EXPECT_TRUE(sameOutputs(ref, g, twoInputs(8), false));
}

TEST(NegativeIR, ReductionWhoseInputIsUsedElsewhereThroughThePipeline) {
  auto g = graphOf("%a : Tensor, %b : Tensor", kSharedReduce);
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(r.changed);
  EXPECT_TRUE(r.rejectedWith("also used elsewhere")) << r.dump();
  // The elementwise part still fuses; the sum reads its materialised output.
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check_count("tsfuse::pairwise", 1, true)->check_count("aten::sum", 1, true)->check_not("tsfuse::reduce");
  }));
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("tsfuse::reduce"); }));
  EXPECT_TRUE(sameOutputs(ref, g, twoInputs(9), false));
}

TEST(NegativeIR, KnownEqualShapesWithoutBroadcastAreRejected) {
  auto g = parseGraph(R"IR(
graph(%a : Float(4, 5, strides=[5, 1], requires_grad=0, device=cpu),
      %b : Float(4, 5, strides=[5, 1], requires_grad=0, device=cpu)):
  %one : int = prim::Constant[value=1]()
  %s : Float(4, 5, strides=[5, 1], requires_grad=0, device=cpu) = aten::sub(%a, %b, %one)
  %d : Float(4, 5, strides=[5, 1], requires_grad=0, device=cpu) = aten::abs(%s)
  return (%d)
)IR");
  PassRun r = runPairwise(g);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_TRUE(r.rejectedWith("no operand broadcasts")) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("tsfuse::"); }));
}

TEST(NegativeIR, KnownBroadcastingShapesAreFused) {
  auto g = parseGraph(R"IR(
graph(%a : Float(4, 1, strides=[1, 1], requires_grad=0, device=cpu),
      %b : Float(1, 5, strides=[5, 1], requires_grad=0, device=cpu)):
  %one : int = prim::Constant[value=1]()
  %s : Float(4, 5, strides=[5, 1], requires_grad=0, device=cpu) = aten::sub(%a, %b, %one)
  %d : Float(4, 5, strides=[5, 1], requires_grad=0, device=cpu) = aten::abs(%s)
  return (%d)
)IR");
  PassRun r = runPairwise(g);
  EXPECT_TRUE(r.changed) << r.dump();
  EXPECT_EQ(r.rejects(), 0) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_count("tsfuse::pairwise", 1, true); }));
}

// The line of an interpreter error that carries the op's own message.
std::string graphError(const std::shared_ptr<Graph>& g, const std::vector<c10::IValue>& in) {
  try {
    runGraph(g, in);
  } catch (const std::exception& e) {
    std::string m = e.what();
    auto p = m.rfind("RuntimeError: ");
    if (p != std::string::npos) m = m.substr(p + 14);
    return firstLine(m);
  }
  return "";
}

TEST(NegativeIR, ShapesThatDoNotBroadcastRaiseEagersErrorAfterFusion) {
  auto g = graphOf("%a : Tensor, %b : Tensor", R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %m : Tensor = aten::mul(%d, %two)
  %t : Tensor = aten::sum(%m, %dims1, %false, %none)
  return (%t, %s)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(r.changed) << r.dump();
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 1u) << r.ir;
  Gen gen(10);
  std::vector<c10::IValue> bad = {gen.tensor({3, 4}, at::kFloat), gen.tensor({5, 4}, at::kFloat)};
  std::string want = graphError(ref, bad);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(graphError(g, bad), want);

  // Fused region alone (its first op is the one that raises): drop the shared %s output.
  auto g2 = graphOf("%a : Tensor, %b : Tensor", R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %t : Tensor = aten::sum(%d, %dims1, %false, %none)
  return (%t)
)IR");
  auto ref2 = g2->copy();
  runPipelineOn(g2);
  ASSERT_EQ(findNodes(g2, "tsfuse::reduce").size(), 1u);
  std::string want2 = graphError(ref2, bad);
  ASSERT_FALSE(want2.empty());
  EXPECT_NE(want2.find("must match the size"), std::string::npos) << want2;
  EXPECT_EQ(graphError(g2, bad), want2);
  EXPECT_TRUE(sameOutputs(ref2, g2, twoInputs(11), false));
}

}  // namespace

}  // namespace ir_negative_test
