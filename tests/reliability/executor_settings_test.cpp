// Executor settings in a LibTorch app (registration/executor_settings.h): with graph-executor
// optimization off, the load-time pass cannot run; the model's results are eager's and tsfuse logs
// one warning naming the setting and the remedy. (Python: tests/python/test_executor_settings.py.)
#include "test_util.h"

#include "registration/executor_settings.h"
#include "tsfuse/tsfuse.h"

#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

namespace reliability_executor_settings_test {

namespace {

using namespace tsfuse_test;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool executedTsfuseOp() {
  for (const torch::jit::Node* n : torch::jit::lastExecutedOptimizedGraph()->nodes())
    if (std::string(n->kind().ns().toUnqualString()) == "tsfuse") return true;
  return false;
}

TEST(ExecutorSettings, OptimizationOffRunsExactAndWarnsOnce) {
  if (!tsfuse::loadTimeRegistration()) GTEST_SKIP() << "no load-time registration";
  if (tsfuse::executorSettingWarnings() != 0) GTEST_SKIP() << "warned before this test";
  torch::jit::Module m("M");
  m.define(R"(
def forward(self, x, y):
    return (x.unsqueeze(1) - y.unsqueeze(0)).abs().lt(1.0).sum(0)
)");
  Gen g(7);
  const at::Tensor x = g.tensor({40, 3}, at::kFloat), y = g.tensor({30, 3}, at::kFloat);
  const at::Tensor eager = (x.unsqueeze(1) - y.unsqueeze(0)).abs().lt(1.0).sum(0);
  c10::NoGradGuard noGrad;
  torch::jit::GraphOptimizerEnabledGuard off(false);  // this thread's setting; restored at the end

  testing::internal::CaptureStderr();
  for (int call = 0; call < 3; ++call) {
    EXPECT_TRUE(at::equal(m.forward({x, y}).toTensor(), eager)) << "call " << call;
    EXPECT_FALSE(executedTsfuseOp()) << "call " << call;
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(tsfuse::executorSettingWarnings(), 1u);
  EXPECT_EQ(count(err, "[warning] graph-executor optimization is off"), 1u) << err;
  EXPECT_EQ(count(err, "setGraphExecutorOptimize(false)"), 1u) << err;
  EXPECT_EQ(count(err, "optimize-ts in.pt out.pt"), 1u) << err;
}

}  // namespace

}  // namespace reliability_executor_settings_test
