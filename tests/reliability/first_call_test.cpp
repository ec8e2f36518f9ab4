// First-call mode per method (registration/first_call.h): with the load-time registration, a
// method called through torch::jit::Method (how LibTorch apps call a model) whose first call
// stores no broadcast intermediate to fuse (nothing to fuse, or a region over operands of one
// shape) keeps PyTorch's profiled first call; one that does is optimized, and fused, on its first
// call; the process-wide count is 0 again after either.
#include "test_util.h"

#include "registration/first_call.h"
#include "tsfuse/tsfuse.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

namespace reliability_first_call_test {

namespace {

using namespace tsfuse_test;

// Skips unless the library registered itself in first-call mode at load (TSFUSE_DISABLE and
// TSFUSE_FIRST_CALL=0 turn that off).
#define REQUIRE_FIRST_CALL_MODE()                                              \
  do {                                                                         \
    auto reg = tsfuse::loadTimeRegistration();                                 \
    if (!reg || !reg->previousProfiledRuns || *reg->previousProfiledRuns == 0) \
      GTEST_SKIP() << "load-time registration not in first-call mode";         \
    ASSERT_EQ(torch::jit::getNumProfiledRuns().load(), 0u);                    \
  } while (0)

torch::jit::GraphExecutor& executorOf(torch::jit::Module& m) {
  return torch::jit::toGraphFunction(m.get_method("forward").function()).get_executor();
}

torch::jit::Module scripted(const char* source) {
  torch::jit::Module m("M");
  m.define(source);
  return m;
}

constexpr const char* kNothingToFuse = R"(
def forward(self, x):
    return torch.mm(x, x.t())
)";

constexpr const char* kCloseCounts = R"(
def forward(self, x, y):
    return (x.unsqueeze(1) - y.unsqueeze(0)).abs().lt(1.0).sum(0)
)";

TEST(FirstCallPolicy, MethodWithNothingToFuseKeepsPyTorchsProfiledRun) {
  REQUIRE_FIRST_CALL_MODE();
  torch::jit::Module m = scripted(kNothingToFuse);
  const at::Tensor x = Gen(3).tensor({5, 4}, at::kFloat);
  const size_t before = tsfuse::firstCallStats().profiled;
  c10::NoGradGuard noGrad;

  EXPECT_TRUE(at::equal(m.forward({x}).toTensor(), at::mm(x, x.t())));
  EXPECT_FALSE(executorOf(m).isOptimized()) << "the first call ran the profiling plan";
  EXPECT_EQ(torch::jit::getNumProfiledRuns().load(), 0u) << "the count is lent for one graph only";
  EXPECT_EQ(tsfuse::firstCallStats().profiled, before + 1);

  EXPECT_TRUE(at::equal(m.forward({x}).toTensor(), at::mm(x, x.t())));
  EXPECT_TRUE(executorOf(m).isOptimized()) << "the second call built the optimized plan";
}

TEST(FirstCallPolicy, MethodWithSomethingToFuseIsFusedOnItsFirstCall) {
  REQUIRE_FIRST_CALL_MODE();
  torch::jit::Module m = scripted(kCloseCounts);
  Gen g(5);
  const at::Tensor x = g.tensor({7}, at::kFloat), y = g.tensor({6}, at::kFloat);
  const size_t before = tsfuse::firstCallStats().firstCall;
  c10::NoGradGuard noGrad;

  EXPECT_TRUE(at::equal(m.forward({x, y}).toTensor(), (x.unsqueeze(1) - y.unsqueeze(0)).abs().lt(1.0).sum(0)));
  EXPECT_TRUE(executorOf(m).isOptimized());
  std::shared_ptr<torch::jit::Graph> plan = torch::jit::lastExecutedOptimizedGraph();
  ASSERT_TRUE(plan);
  EXPECT_NE(plan->toString().find("tsfuse::reduce"), std::string::npos) << *plan;
  EXPECT_EQ(torch::jit::getNumProfiledRuns().load(), 0u);
  EXPECT_EQ(tsfuse::firstCallStats().firstCall, before + 1);
}

// The decision follows the call's values (passes/analysis/broadcast_probe.h): the same method stores a
// broadcast intermediate for operands shaped [N, 1, D] and [1, M, D] (a module buffer's sizes
// count too), and none for two [N, M, D] operands.
constexpr const char* kDistancesOfShapedOperands = R"(
def forward(self, x, y):
    return (x - y).abs().sum(-1)
)";

TEST(FirstCallPolicy, ARegionWithoutABroadcastIntermediateKeepsPyTorchsProfiledRun) {
  REQUIRE_FIRST_CALL_MODE();
  torch::jit::Module m = scripted(kDistancesOfShapedOperands);
  Gen g(11);
  const at::Tensor x = g.tensor({6, 5, 3}, at::kFloat), y = g.tensor({6, 5, 3}, at::kFloat);
  const size_t before = tsfuse::firstCallStats().profiled;
  c10::NoGradGuard noGrad;

  EXPECT_TRUE(at::equal(m.forward({x, y}).toTensor(), (x - y).abs().sum(-1)));
  EXPECT_FALSE(executorOf(m).isOptimized()) << "the first call ran the profiling plan";
  EXPECT_EQ(tsfuse::firstCallStats().profiled, before + 1);
  EXPECT_EQ(torch::jit::getNumProfiledRuns().load(), 0u);
  EXPECT_TRUE(at::allclose(m.forward({x, y}).toTensor(), (x - y).abs().sum(-1)));
  EXPECT_TRUE(executorOf(m).isOptimized());
}

TEST(FirstCallPolicy, OperandsThatBroadcastToAnOuterProductAreFusedOnTheFirstCall) {
  REQUIRE_FIRST_CALL_MODE();
  Gen g(13);
  const at::Tensor x = g.tensor({6, 1, 3}, at::kFloat), y = g.tensor({1, 5, 3}, at::kFloat);
  const at::Tensor want = (x - y).abs().sum(-1);
  c10::NoGradGuard noGrad;

  torch::jit::Module args = scripted(kDistancesOfShapedOperands);
  torch::jit::Module buffer("B");
  buffer.register_buffer("y", y);
  buffer.define(R"(
def forward(self, x):
    return (x - self.y).abs().sum(-1)
)");
  const std::pair<torch::jit::Module*, std::vector<c10::IValue>> calls[] = {{&args, {x, y}}, {&buffer, {x}}};
  for (const auto& [m, inputs] : calls) {
    const size_t before = tsfuse::firstCallStats().firstCall;
    EXPECT_TRUE(at::allclose(m->forward(inputs).toTensor(), want));
    EXPECT_TRUE(executorOf(*m).isOptimized()) << "first-call mode";
    std::shared_ptr<torch::jit::Graph> plan = torch::jit::lastExecutedOptimizedGraph();
    ASSERT_TRUE(plan);
    EXPECT_NE(plan->toString().find("tsfuse::"), std::string::npos) << *plan;
    EXPECT_EQ(tsfuse::firstCallStats().firstCall, before + 1);
  }
}

// Python calls a scripted method through Function::run, which the observer only sees from
// inside the interpreter, after the plan was chosen: such calls keep first-call mode.
TEST(FirstCallPolicy, CallsNotMadeThroughMethodKeepFirstCallMode) {
  REQUIRE_FIRST_CALL_MODE();
  torch::jit::Module m = scripted(kNothingToFuse);
  const at::Tensor x = Gen(7).tensor({3, 3}, at::kFloat);
  c10::NoGradGuard noGrad;
  torch::jit::Stack stack{m._ivalue(), x};
  m.get_method("forward").function().run(stack);
  EXPECT_TRUE(at::equal(stack.back().toTensor(), at::mm(x, x.t())));
  EXPECT_TRUE(executorOf(m).isOptimized());
  EXPECT_EQ(torch::jit::getNumProfiledRuns().load(), 0u);
}

TEST(FirstCallPolicy, ACountTheUserSetStands) {
  REQUIRE_FIRST_CALL_MODE();
  torch::jit::Module m = scripted(kNothingToFuse);
  const at::Tensor x = Gen(9).tensor({2, 2}, at::kFloat);
  c10::NoGradGuard noGrad;
  torch::jit::getNumProfiledRuns() = 2;
  m.forward({x});
  EXPECT_EQ(torch::jit::getNumProfiledRuns().load(), 2u);
  torch::jit::getNumProfiledRuns() = 0;
}

}  // namespace

}  // namespace reliability_first_call_test
