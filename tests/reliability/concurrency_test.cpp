// Concurrency: many threads load and run scripted models (each load builds a new executor plan,
// so the executor pre-pass runs on those threads) while another thread registers and clears
// executor passes, toggles setEnabled and opts modules out (registration/executor_hook.*). Every
// output must equal the eager reference, whichever way the graph was (or was not) fused. The
// TSan build (make test-tsan) runs this test.
#include "test_util.h"

#include "tsfuse/tsfuse.h"

#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include <atomic>
#include <sstream>
#include <thread>

namespace reliability_concurrency_test {

namespace {

using namespace tsfuse_test;

constexpr const char* kSource = R"(
def forward(self, x, y):
    d = (x.unsqueeze(1) - y.unsqueeze(0)).abs()
    inter = torch.minimum(x.unsqueeze(1), y.unsqueeze(0)) * 2.0
    return d.lt(1.0).sum(0), inter.clamp(0.0, 1.0)
)";

std::string savedModel() {
  torch::jit::Module m("M");
  m.define(kSource);
  std::ostringstream buf;
  m.save(buf);
  return buf.str();
}

TEST(Concurrency, ModelsRunWhilePassesAreRegisteredAndCleared) {
  const std::string bytes = savedModel();
  Gen g(4242);
  const at::Tensor x = g.tensor({37}, at::kFloat), y = g.tensor({29}, at::kFloat);
  const at::Tensor refCount = (x.unsqueeze(1) - y.unsqueeze(0)).abs().lt(1.0).sum(0);
  const at::Tensor refInter = (at::minimum(x.unsqueeze(1), y.unsqueeze(0)) * 2.0).clamp(0.0, 1.0);

  constexpr int kRunners = 6, kIterations = 12;
  std::atomic<bool> stop{false};
  std::atomic<int> runs{0}, fused{0}, registrations{0}, failures{0};
  std::mutex failMu;
  std::string firstFailure;
  auto fail = [&](const std::string& why) {
    std::lock_guard<std::mutex> lock(failMu);
    if (failures++ == 0) firstFailure = why;
  };

  std::thread registrar([&] {
    bool enabled = true;
    while (!stop) {
      tsfuse::ExecutorRegistration r = tsfuse::registerExecutorPass({}, registrations % 2 == 0);
      std::this_thread::yield();
      tsfuse::setEnabled(enabled = !enabled);
      tsfuse::clearExecutorPass(r);
      ++registrations;
    }
    tsfuse::setEnabled(true);
  });

  std::vector<std::thread> runners;
  for (int t = 0; t < kRunners; ++t) {
    runners.emplace_back([&, t] {
      try {
        c10::NoGradGuard noGrad;
        // One module shared by this thread's iterations, plus a fresh load per iteration (a new
        // plan: the pre-pass runs now, concurrently with the registrar).
        std::istringstream in0(bytes);
        torch::jit::Module shared = torch::jit::load(in0);
        for (int k = 0; k < kIterations; ++k) {
          std::istringstream in(bytes);
          torch::jit::Module m = (k % 3 == 2) ? shared : torch::jit::load(in);
          if (k % 4 == 1) tsfuse::optOut(m);
          if (t % 2 == 0 && k % 3 == 0) tsfuse::optimize(m);  // the explicit path, concurrently
          auto out = m.forward({x, y}).toTuple();
          ++runs;
          if (!at::equal(out->elements()[0].toTensor(), refCount)) fail("count differs");
          if (!at::equal(out->elements()[1].toTensor(), refInter)) fail("intersection differs");
          auto graph = m.get_method("forward").graph()->toString();
          if (graph.find("tsfuse::") != std::string::npos) ++fused;
        }
      } catch (const std::exception& e) {
        fail(e.what());
      }
    });
  }
  for (auto& th : runners) th.join();
  stop = true;
  registrar.join();

  EXPECT_EQ(failures.load(), 0) << firstFailure;
  EXPECT_EQ(runs.load(), kRunners * kIterations);
  EXPECT_GT(registrations.load(), 0);
  EXPECT_GT(fused.load(), 0);  // the explicit optimize() calls fuse at least
  std::printf("[ concurrency ] %d runs on %d threads, %d registrations, %d explicitly fused graphs\n", runs.load(),
              kRunners, registrations.load(), fused.load());

  // The load-time registration survived: a fresh model is still fused on its first call.
  if (tsfuse::loadTimeRegistration()) {
    std::istringstream in(bytes);
    torch::jit::Module m = torch::jit::load(in);
    c10::NoGradGuard noGrad;
    auto out = m.forward({x, y}).toTuple();
    EXPECT_TRUE(at::equal(out->elements()[0].toTensor(), refCount));
    std::shared_ptr<torch::jit::Graph> plan = torch::jit::lastExecutedOptimizedGraph();
    ASSERT_TRUE(plan);
    EXPECT_NE(plan->toString().find("tsfuse::"), std::string::npos) << *plan;
  }
}

}  // namespace

}  // namespace reliability_concurrency_test
