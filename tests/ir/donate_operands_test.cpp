// IR-string tests of donate_operands (passes/donate_operands.cpp): which operands of a fused op
// the graph gives up (a fresh tensor of the op's block read by nothing else) and which it keeps,
// each case named; the marked graphs compute what the originals did.
#include "ir_util.h"

#include "passes/donate_operands.h"

namespace {

using namespace tsfuse_test;

const char* kConsts = R"IR(
  %none : NoneType = prim::Constant()
  %false : bool = prim::Constant[value=0]()
  %true : bool = prim::Constant[value=1]()
  %one : int = prim::Constant[value=1]()
  %three : int = prim::Constant[value=3]()
  %dims1 : int[] = prim::Constant[value=[1]]()
)IR";

// The donated argument of the graph's one fused op of `kind`.
std::vector<int64_t> donatedOf(const std::shared_ptr<Graph>& g, const std::string& kind) {
  auto nodes = findNodes(g, kind);
  EXPECT_EQ(nodes.size(), 1u) << g->toString();
  if (nodes.size() != 1) return {-1};
  auto slot = nodes[0]->schema().argumentIndexWithName("donated");
  EXPECT_TRUE(slot.has_value());
  return constInput(nodes[0], *slot).toIntVector();
}

std::vector<c10::IValue> inputs(uint64_t seed) {
  Gen g(seed);
  return {g.tensor({4, 3}, at::kFloat), g.tensor({3, 5}, at::kFloat), g.tensor({1, 5}, at::kFloat)};
}

std::shared_ptr<Graph> graphOf(const std::string& body) {
  return parseGraph("graph(%a : Tensor, %b : Tensor, %w : Tensor):" + std::string(kConsts) + body);
}

using Donated = std::vector<int64_t>;

TEST(DonateOperandsIR, AFreshOperandReadOnlyByTheFusedOpIsDonated) {
  auto g = graphOf(R"IR(
  %m : Tensor = aten::matmul(%a, %b)
  %s : Tensor = aten::sub(%m, %w, %one)
  %d : Tensor = aten::abs(%s)
  return (%d)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(donatedOf(g, "tsfuse::pairwise"), Donated{0}) << r.ir;  // %m, not the input %w
  EXPECT_TRUE(sameOutputs(ref, g, inputs(1)));
  // The pass is idempotent.
  EXPECT_FALSE(tsfuse::DonateOperands(g));
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
  EXPECT_EQ(donatedOf(g, "tsfuse::reduce"), Donated{0});
  EXPECT_TRUE(sameOutputs(ref, g, inputs(2)));
}

// gpytorch's distance: matmul(...).clamp_min_(0). The in-place result is the matmul's memory,
// which nothing else reads; one whose self is read elsewhere is kept.
TEST(DonateOperandsIR, AnInPlaceResultOverAFreshTensorIsDonated) {
  auto g = graphOf(R"IR(
  %zero : float = prim::Constant[value=0.]()
  %m : Tensor = aten::matmul(%a, %b)
  %c : Tensor = aten::clamp_min_(%m, %zero)
  %s : Tensor = aten::sub(%c, %w, %one)
  %d : Tensor = aten::abs(%s)
  return (%d)
)IR");
  auto ref = g->copy();
  runPipelineOn(g);
  EXPECT_EQ(donatedOf(g, "tsfuse::pairwise"), Donated{0});
  EXPECT_TRUE(sameOutputs(ref, g, inputs(7)));

  auto h = graphOf(R"IR(
  %zero : float = prim::Constant[value=0.]()
  %m : Tensor = aten::matmul(%a, %b)
  %n : Tensor = aten::neg(%m)
  %c : Tensor = aten::clamp_min_(%m, %zero)
  %s : Tensor = aten::sub(%c, %w, %one)
  %d : Tensor = aten::abs(%s)
  return (%d, %n)
)IR");
  auto href = h->copy();
  runPipelineOn(h);
  EXPECT_EQ(donatedOf(h, "tsfuse::pairwise"), Donated{}) << h->toString();
  EXPECT_TRUE(sameOutputs(href, h, inputs(8)));
}

TEST(DonateOperandsIR, AnOperandReadAfterTheFusedOpIsKept) {
  auto g = graphOf(R"IR(
  %m : Tensor = aten::matmul(%a, %b)
  %s : Tensor = aten::sub(%m, %w, %one)
  %d : Tensor = aten::abs(%s)
  return (%d, %m)
)IR");
  auto ref = g->copy();
  runPipelineOn(g);
  EXPECT_EQ(donatedOf(g, "tsfuse::pairwise"), Donated{});
  EXPECT_TRUE(sameOutputs(ref, g, inputs(3)));
}

TEST(DonateOperandsIR, AViewIsKept) {
  auto g = graphOf(R"IR(
  %m : Tensor = aten::matmul(%b, %a)
  %v : Tensor = aten::t(%m)
  %s : Tensor = aten::sub(%v, %w, %one)
  %d : Tensor = aten::abs(%s)
  return (%d)
)IR");
  auto ref = g->copy();
  runPipelineOn(g);
  EXPECT_EQ(donatedOf(g, "tsfuse::pairwise"), Donated{});
  Gen gen(4);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({3, 4}, at::kFloat), gen.tensor({5, 3}, at::kFloat),
                                   gen.tensor({1, 5}, at::kFloat)}));
}

// %m is made before the loop and read on every pass through it; %acc is a block parameter.
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
  EXPECT_EQ(donatedOf(g, "tsfuse::pairwise"), Donated{});
  EXPECT_TRUE(sameOutputs(ref, g, inputs(5)));
}

// The graph may still give up an operand that a later pass hands a new reader (the executor's
// CSE): the op sees the extra handle at run time and leaves the operand alone.
TEST(DonateOperandsIR, AHeldOperandIsNotWrittenEvenWhenTheGraphDonatesIt) {
  auto g = graphOf(R"IR(
  %m : Tensor = aten::matmul(%a, %b)
  %s : Tensor = aten::sub(%m, %w, %one)
  %d : Tensor = aten::abs(%s)
  return (%d)
)IR");
  auto ref = g->copy();
  runPipelineOn(g);
  ASSERT_EQ(donatedOf(g, "tsfuse::pairwise"), Donated{0});
  // Give %m a reader after the fused op, as CSE would.
  torch::jit::Node* fused = findNodes(g, "tsfuse::pairwise")[0];
  torch::jit::Value* m = fused->input(0)->node()->input(0);
  g->registerOutput(m);
  ref->registerOutput(ref->outputs()[0]->node()->input(0)->node()->input(0));  // sub's %m
  EXPECT_TRUE(sameOutputs(ref, g, inputs(6)));
}

}  // namespace
