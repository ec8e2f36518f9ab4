// IR-string tests of zero_dim_numbers: a 0-dim tensor constant as add/sub/mul/div's `other`
// becomes a number as the executor's CanonicalizeOps makes it (the reference: torch's own pass),
// offline only; the executor's pre-pass leaves one its constant propagation made a tensor.
#include "ir_util.h"

#include "passes/zero_dim_numbers.h"
#include "registration/executor_hook.h"

#include <torch/csrc/jit/passes/canonicalize_graph_fuser_ops.h>

#include <functional>

namespace ir_zero_dim_numbers_test {

namespace {

using namespace tsfuse_test;
using torch::jit::Node;
using torch::jit::Value;

// A trace records `n + 1e-16` with the number as a 0-dim float64 tensor constant; the executor's
// CanonicalizeOps makes it a number again, so int64 0-dim + 1e-16 is float32.
std::shared_ptr<Graph> tracedEpsilon() {
  auto g = parseGraph(R"IR(
graph(%x : Tensor, %n : Tensor):
  %one : int = prim::Constant[value=1]()
  %s : Tensor = aten::sum(%x, %one)
  return (%s)
)IR");
  Node* sum = findNodes(g, "aten::sum").front();
  torch::jit::WithInsertPoint guard(g->return_node());
  Value* eps = g->insertConstant(at::scalar_tensor(1e-16, at::kDouble));
  // Created, not inserted: insert() would pick add.Scalar through aten::ScalarImplicit.
  auto op = [&](c10::Symbol kind, std::vector<Value*> args) { return g->insertNode(g->create(kind, args))->output(); };
  Value* den = op(c10::aten::add, {g->inputs()[1], eps, g->insertConstant(int64_t{1})});
  Value* q = op(c10::aten::div, {sum->output(), den});
  g->return_node()->replaceInput(0, op(c10::aten::mul, {q, eps}));
  return g;
}

// Whether every add/sub/mul/div of `g` takes a number as `other`.
bool othersAreNumbers(const std::shared_ptr<Graph>& g) {
  for (const char* kind : {"aten::add", "aten::mul"})
    for (Node* n : findNodes(g, kind))
      if (n->input(1)->type()->cast<c10::TensorType>()) return false;
  return true;
}

TEST(ZeroDimNumbersIR, ATracedConstantBecomesANumberAsTheExecutorMakesIt) {
  auto g = tracedEpsilon();
  ASSERT_FALSE(othersAreNumbers(g));
  auto ref = g->copy();
  torch::jit::CanonicalizeOps(ref);
  PassRun z = runPass(g, tsfuse::ZeroDimNumbers);
  EXPECT_TRUE(z.changed) << z.dump();
  EXPECT_TRUE(othersAreNumbers(g)) << z.dump();
  EXPECT_TRUE(
      fileCheck(z.ir, [](FileCheck& fc) { fc.check("float = prim::Constant[value=9.99")->check("aten::add"); }));
  std::vector<c10::IValue> in = {at::ones({3}), at::scalar_tensor(7, at::kLong)};
  EXPECT_EQ(runGraph(ref, in)[0].toTensor().scalar_type(), at::kFloat);
  EXPECT_TRUE(sameOutputs(ref, g, in));
  PassRun p = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << p.dump();
  EXPECT_TRUE(sameOutputs(ref, g, in));
}

// amin over both dims of x[None] - 2 * x[:, None], times the 0-dim tensor `factor` makes.
std::shared_ptr<Graph> aminOfDifferencesTimes(const std::function<Value*(Graph&)>& factor) {
  auto g = parseGraph(R"IR(
graph(%x : Tensor):
  %m1 : int = prim::Constant[value=-1]()
  %z : int = prim::Constant[value=0]()
  %two : int = prim::Constant[value=2]()
  %f : bool = prim::Constant[value=0]()
  %a : Tensor = aten::unsqueeze(%x, %z)
  %b : Tensor = aten::unsqueeze(%x, %m1)
  %d : Tensor = aten::sub(%a, %b, %two)
  %dims : int[] = prim::ListConstruct(%z, %m1)
  %m : Tensor = aten::amin(%d, %dims, %f)
  return (%m)
)IR");
  Node* amin = findNodes(g, "aten::amin").front();
  torch::jit::WithInsertPoint guard(g->return_node());
  g->return_node()->replaceInput(0, g->insert(c10::aten::mul, {amin->output(), factor(*g)}));
  return g;
}

// What the executor's pre-pass receives: its CanonicalizeOps ran before its constant propagation
// folded torch.tensor(-1.5) into this constant, and TorchScript keeps it a tensor: the float16
// 0-dim amin times a float32 0-dim tensor is float32 (a number would give float16).
TEST(ZeroDimNumbersIR, AtLoadTimeAConstantTheExecutorMadeStaysATensor) {
  auto g = aminOfDifferencesTimes([](Graph& g) { return g.insertConstant(at::scalar_tensor(-1.5, at::kFloat)); });
  auto ref = g->copy();
  std::vector<c10::IValue> in = {at::tensor({1.0, -2.5, 3.0}).to(at::kHalf)};
  ASSERT_EQ(runGraph(ref, in)[0].toTensor().scalar_type(), at::kFloat);
  PassRun p = runPipelineOn(g, tsfuse::executorPipelineOptions({}));
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 1u) << p.dump();
  EXPECT_TRUE(fileCheck(p.ir, [](FileCheck& fc) { fc.check("Float(requires_grad=0, device=cpu) = prim::Constant"); }));
  EXPECT_TRUE(sameOutputs(ref, g, in));
}

// Offline, canonicalize's constant propagation folds torch.tensor(0.5); TorchScript folds it after
// its CanonicalizeOps, so it stays a tensor there. The saved graph must not hold it as a constant,
// which CanonicalizeOps would make a number when the file is loaded: float16 0-dim * it is float32.
TEST(ZeroDimNumbersIR, AFoldedTensorFactoryStaysATensorInTheSavedGraph) {
  auto g = aminOfDifferencesTimes([](Graph& g) { return g.insert(c10::aten::tensor, {0.5}); });
  auto ref = g->copy();
  std::vector<c10::IValue> in = {at::tensor({1.0, -2.5, 3.0}).to(at::kHalf)};
  ASSERT_EQ(runGraph(ref, in)[0].toTensor().scalar_type(), at::kFloat);
  PassRun p = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 1u) << p.dump();
  EXPECT_TRUE(fileCheck(p.ir, [](FileCheck& fc) { fc.check("aten::tensor")->check("tsfuse::reduce"); }));
  auto loaded = g->copy();
  torch::jit::CanonicalizeOps(loaded);  // what loading the saved file does first
  EXPECT_TRUE(sameOutputs(ref, loaded, in)) << p.dump();
}

}  // namespace
}  // namespace ir_zero_dim_numbers_test
