// IR-string tests of donate_operands (passes/donate_operands.cpp): which operands of a fused op
// the graph gives up (read by nothing after it) and which it keeps, each case named; and that the
// marked graphs compute what the originals did, the op taking an operand's memory only where
// nothing else holds it at run time.
#include "ir_util.h"

#include "passes/donate_operands.h"

#include <set>

namespace ir_donate_operands_test {

namespace {

using namespace tsfuse_test;
using Names = std::set<std::string>;

// The names of the operands the graph's one fused op of `kind` is given.
Names donatedOf(const std::shared_ptr<Graph>& g, const std::string& kind) {
  auto nodes = findNodes(g, kind);
  EXPECT_EQ(nodes.size(), 1u) << g->toString();
  if (nodes.size() != 1) return {"?"};
  auto slot = nodes[0]->schema().argumentIndexWithName("donated");
  EXPECT_TRUE(slot.has_value());
  Names out;
  for (int64_t i : constInput(nodes[0], *slot).toIntVector())
    out.insert(nodes[0]->input(0)->node()->input(i)->debugName());
  return out;
}

std::vector<c10::IValue> inputs(uint64_t seed) {
  Gen g(seed);
  return {g.tensor({4, 3}, at::kFloat), g.tensor({3, 5}, at::kFloat), g.tensor({1, 5}, at::kFloat)};
}

std::shared_ptr<Graph> graphOf(const std::string& body) {
  return graphWithConstants("%a : Tensor, %b : Tensor, %w : Tensor", body, R"IR(
  %three : int = prim::Constant[value=3]()
  %fzero : float = prim::Constant[value=0.]()
)IR",
                            /*named=*/true);
}

// |a @ b - w|: the fused op's operands are the matmul's result and the input %w.
const std::string kAbsDiffOfMatmul = R"IR(
  %m : Tensor = aten::matmul(%a, %b)
  %s : Tensor = aten::sub(%m, %w, %one)
  %d : Tensor = aten::abs(%s)
)IR";

// %m and the input %w are read by nothing else; whether the call may take their memory is decided
// when it runs (%w is the caller's).
TEST(DonateOperandsIR, OperandsReadOnlyByTheFusedOpAreDonated) {
  auto g = graphOf(kAbsDiffOfMatmul + "  return (%d)\n");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(donatedOf(g, "tsfuse::pairwise"), (Names{"m", "w"})) << r.ir;
  EXPECT_TRUE(sameOutputs(ref, g, inputs(1)));
  EXPECT_FALSE(tsfuse::DonateOperands(g));  // idempotent
}

TEST(DonateOperandsIR, TheOperandOfAReductionIsDonated) {
  auto g = graphOf(R"IR(
  %m : Tensor = aten::matmul(%a, %b)
  %s : Tensor = aten::sub(%m, %w, %one)
  %p : Tensor = aten::mul(%s, %s)
  %r : Tensor = aten::sum(%p, %dims1, %false, %none)
  return (%r)
)IR");
  auto ref = g->copy();
  runPipelineOn(g);
  EXPECT_EQ(donatedOf(g, "tsfuse::reduce"), (Names{"m", "w"}));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(2)));
}

TEST(DonateOperandsIR, AnOperandReadAfterTheFusedOpIsKept) {
  auto g = graphOf(kAbsDiffOfMatmul + "  return (%d, %m)\n");
  auto ref = g->copy();
  runPipelineOn(g);
  EXPECT_EQ(donatedOf(g, "tsfuse::pairwise"), (Names{"w"}));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(3)));
}

// gpytorch's distance: matmul(...).clamp_min_(0). The clamp joins the region (a matmul's result
// is fresh) and the matmul's result is donated, also when %m had a reader before: nothing reads
// it after the fused op.
TEST(DonateOperandsIR, AnInPlaceResultIsDonated) {
  for (const char* neg : {"", "  %n : Tensor = aten::neg(%m)\n"}) {
    auto g = graphOf(std::string("  %m : Tensor = aten::matmul(%a, %b)\n") + neg + R"IR(
  %c : Tensor = aten::clamp_min_(%m, %fzero)
  %s : Tensor = aten::sub(%c, %w, %one)
  %d : Tensor = aten::abs(%s)
)IR" + (*neg ? "  return (%d, %n)\n" : "  return (%d)\n"));
    auto ref = g->copy();
    runPipelineOn(g);
    EXPECT_EQ(donatedOf(g, "tsfuse::pairwise"), (Names{"m", "w"})) << neg;
    EXPECT_TRUE(sameOutputs(ref, g, inputs(7))) << neg;
  }
}

// A view of a tensor that is read later: the graph gives the view up, its memory stays the
// tensor's (the op sees the storage's other owner at run time).
TEST(DonateOperandsIR, AViewOfALiveTensorIsDonatedButNotTaken) {
  auto g = graphOf(R"IR(
  %m : Tensor = aten::matmul(%b, %a)
  %v : Tensor = aten::t(%m)
  %s : Tensor = aten::sub(%v, %w, %one)
  %d : Tensor = aten::abs(%s)
  return (%d, %m)
)IR");
  auto ref = g->copy();
  runPipelineOn(g);
  EXPECT_EQ(donatedOf(g, "tsfuse::pairwise"), (Names{"v", "w"}));
  Gen gen(4);
  EXPECT_TRUE(sameOutputs(
      ref, g, {gen.tensor({3, 4}, at::kFloat), gen.tensor({5, 3}, at::kFloat), gen.tensor({1, 5}, at::kFloat)}));
}

// %m is made before the loop and read on every pass through it, %w is the graph's; %acc, the
// loop-carried value, is read once per pass.
TEST(DonateOperandsIR, AnOperandFromOutsideALoopIsKept) {
  auto g = graphOf(R"IR(
  %m : Tensor = aten::matmul(%a, %b)
  %z : Tensor = aten::matmul(%a, %b)
  %out : Tensor = prim::Loop(%three, %true, %z)
    block0(%i : int, %acc : Tensor):
      %s : Tensor = aten::sub(%m, %w, %one)
      %d : Tensor = aten::abs(%s)
      %e : Tensor = aten::mul(%d, %acc)
      -> (%true, %e)
  return (%out)
)IR");
  auto ref = g->copy();
  runPipelineOn(g);
  EXPECT_EQ(donatedOf(g, "tsfuse::pairwise"), (Names{"acc"}));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(5)));
}

// The graph may still give up an operand that a later pass hands a new reader (the executor's
// CSE): the op sees the extra handle at run time and leaves the operand alone.
TEST(DonateOperandsIR, AHeldOperandIsNotWrittenEvenWhenTheGraphDonatesIt) {
  auto g = graphOf(kAbsDiffOfMatmul + "  return (%d)\n");
  auto ref = g->copy();
  runPipelineOn(g);
  ASSERT_EQ(donatedOf(g, "tsfuse::pairwise"), (Names{"m", "w"}));
  // Give %m a reader after the fused op, as CSE would.
  torch::jit::Node* fused = findNodes(g, "tsfuse::pairwise")[0];
  g->registerOutput(fused->input(0)->node()->input(0));
  ref->registerOutput(ref->outputs()[0]->node()->input(0)->node()->input(0));  // sub's %m
  EXPECT_TRUE(sameOutputs(ref, g, inputs(6)));
}

}  // namespace

}  // namespace ir_donate_operands_test
