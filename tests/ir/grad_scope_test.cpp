// IR-string tests of autograd-mode scopes (passes/analysis/grad_scope.h): no fused op holds nodes
// on both sides of a node that changes the autograd mode (a `with torch.no_grad():` block's
// prim::Enter / prim::Exit; here aten::set_grad_enabled, which torch.set_grad_enabled scripts to,
// put around the values the test names: the IR parser reads no node without outputs), so a value
// computed without grad is not differentiated through once fused.
#include "ir_util.h"

namespace ir_grad_scope_test {

namespace {

using namespace tsfuse_test;

// `body` with grad disabled from the node making %<from> to the one making %<to>, inclusive.
std::shared_ptr<Graph> withoutGrad(const std::string& body, const std::string& from, const std::string& to) {
  auto g = graphWithConstants("%a : Tensor, %b : Tensor", body, "", /*named=*/true);
  auto at = [&](const std::string& name) {
    for (torch::jit::Node* n : g->nodes())
      if (n->outputs().size() == 1 && n->output()->debugName() == name) return n;
    throw std::runtime_error("no %" + name);
  };
  const c10::Symbol set = c10::Symbol::fromQualString("aten::set_grad_enabled");
  auto flag = [&](bool on) { return g->insertConstant(on); };
  torch::jit::Node* first = at(from);
  torch::jit::Node* last = at(to);
  {
    torch::jit::WithInsertPoint here(first);
    g->insertNode(g->create(set, {flag(false)}, 0));
  }
  torch::jit::WithInsertPoint after(last->next());
  g->insertNode(g->create(set, {flag(true)}, 0));
  g->lint();
  return g;
}

std::vector<c10::IValue> twoInputs(uint64_t seed) {
  Gen g(seed);
  return {g.tensor({4, 1}, at::kFloat), g.tensor({1, 5}, at::kFloat)};
}

// complete IoU's shape: a weight computed without grad, read by the loss after the block.
TEST(GradScopeIR, ARegionStopsAtAChangeOfAutogradMode) {
  auto g = withoutGrad(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %w : Tensor = aten::mul(%d, %two)
  %w2 : Tensor = aten::exp(%w)
  %m : Tensor = aten::mul(%w2, %d)
  %r : Tensor = aten::neg(%m)
  return (%r)
)IR",
                       "w", "w2");
  auto ref = g->copy();
  PassRun r = runPairwise(g);
  EXPECT_EQ(r.rewrites(), 3) << r.dump();  // before, inside and after the block: one op each
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("tsfuse::pairwise")
        ->check("aten::set_grad_enabled")
        ->check("tsfuse::pairwise")
        ->check("aten::set_grad_enabled")
        ->check("tsfuse::pairwise")
        ->check_not("aten::");
  }));
  bool said = false;
  for (const auto& e : r.events) said |= e.reason.find("changes the autograd mode") != std::string::npos;
  EXPECT_TRUE(said) << r.dump();
  for (auto* n : findNodes(g, "tsfuse::pairwise"))
    EXPECT_EQ(exprOf(n).find("sub") != std::string::npos, exprOf(n).find("abs") != std::string::npos);
  EXPECT_TRUE(sameOutputs(ref, g, twoInputs(1)));
}

TEST(GradScopeIR, AReductionOfAValueFromAnotherModeIsNotFused) {
  auto g = withoutGrad(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %r : Tensor = aten::sum(%d, %dims1, %false, %none)
  return (%r)
)IR",
                       "r", "r");
  PassRun r = runReduce(g);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_TRUE(r.rejectedWith("changes the autograd mode")) << r.dump();
}

TEST(GradScopeIR, AnEpilogueStopsAtAChangeOfAutogradMode) {
  auto g = withoutGrad(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %r : Tensor = aten::sum(%d, %dims1, %false, %none)
  %e : Tensor = aten::exp(%r)
  return (%e)
)IR",
                       "e", "e");
  auto ref = g->copy();
  PassRun r = runReduce(g);
  EXPECT_EQ(r.rewrites(), 1) << r.dump();
  EXPECT_TRUE(fileCheck(
      r.ir, [](FileCheck& fc) { fc.check("tsfuse::reduce")->check("aten::set_grad_enabled")->check("aten::exp"); }));
  EXPECT_TRUE(sameOutputs(ref, g, twoInputs(2)));
}

}  // namespace

}  // namespace ir_grad_scope_test
