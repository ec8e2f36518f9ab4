#include "registration/executor_settings.h"

#include "registration/executor_hook.h"
#include "tsfuse/log.h"

#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/runtime/logging.h>

#include <atomic>
#include <mutex>

namespace tsfuse {
namespace {

constexpr const char* kRemedy =
    "rewrite the models ahead of time instead, whose fused ops run under any executor setting: "
    "`optimize-ts in.pt out.pt`, or tsfuse::optimize(module) / tsfuse::load(path) in C++, "
    "tsfuse.optimize(model) in Python (docs/registration.md, \"Executor settings\")";

const char* why(ExecutorSetting s) {
  switch (s) {
    case ExecutorSetting::optimizeOff:
      return "graph-executor optimization is off (torch::jit::setGraphExecutorOptimize(false), "
             "torch._C._set_graph_executor_optimize(False), torch.jit.optimized_execution(False), "
             "Triton's DISABLE_OPTIMIZED_EXECUTION): the executor then runs no registered pass, and "
             "a TorchScript graph with something to fuse ran unfused";
    case ExecutorSetting::profilingModeOff:
      return "the profiling mode is off with the profiling executor on (torch::jit::getProfilingMode() = false, "
             "torch._C._jit_set_profiling_mode(False), Triton's ENABLE_JIT_PROFILING false): torch then runs "
             "its simple executor, which runs no registered pass, and a TorchScript graph with something "
             "to fuse ran unfused";
  }
  return "";
}

std::atomic<bool> gWarned[2];
std::atomic<size_t> gWarnings{0};
thread_local const torch::jit::Graph* tLastChecked = nullptr;

// Torch itself runs graphs with optimization off (a function's default arguments are evaluated
// under GraphOptimizerEnabledGuard(false), e.g. while torch::jit::load compiles a model), so the
// setting alone is no reason to warn. The logger does not see which graph is about to run, but the
// thread's previous run left its plan's graph (lastExecutedOptimizedGraph): a graph run under the
// setting that the pass would have fused (firstCallCandidate: a registration is active and on, the
// model has not opted out, a fusion candidate) is what the warning is about.
// So the warning comes at the thread's next graph-executor run: a model called once is not warned about.
void checkPreviousRun(ExecutorSetting s) {
  std::atomic<bool>& warned = gWarned[static_cast<int>(s)];
  if (warned.load(std::memory_order_relaxed)) return;
  std::shared_ptr<torch::jit::Graph> g = torch::jit::lastExecutedOptimizedGraph();
  if (!g || g.get() == tLastChecked) return;
  tLastChecked = g.get();
  if (!firstCallCandidate(g, {}) || warned.exchange(true)) return;
  ++gWarnings;
  TSFUSE_LOG(registration, warn, why(s), "; ", kRemedy);
}

// Called by every graph-executor run, before it chooses a plan (and for other JIT statistics), on
// the running thread.
class Watcher : public torch::jit::logging::LoggerBase {
 public:
  explicit Watcher(torch::jit::logging::LoggerBase* previous) : previous_(previous) {}
  void addStatValue(const std::string& name, int64_t value) override {
    if (previous_) previous_->addStatValue(name, value);
    if (auto s = settingBlockingPasses())
      if (name == torch::jit::logging::runtime_counters::GRAPH_EXECUTOR_INVOCATIONS) checkPreviousRun(*s);
  }

 private:
  torch::jit::logging::LoggerBase* previous_;
};

}  // namespace

std::optional<ExecutorSetting> settingBlockingPasses() {
  if (!torch::jit::getGraphExecutorOptimize()) return ExecutorSetting::optimizeOff;
  if (torch::jit::getExecutorMode() && !torch::jit::getProfilingMode()) return ExecutorSetting::profilingModeOff;
  return std::nullopt;
}

void watchExecutorSettings() {
  static std::once_flag once;
  // Never deleted: torch may call it until the process ends. (Installed at library load, before
  // any model runs, so no other logger is set between the get and the set.)
  std::call_once(once, [] { torch::jit::logging::setLogger(new Watcher(torch::jit::logging::getLogger())); });
}

size_t executorSettingWarnings() { return gWarnings.load(); }

}  // namespace tsfuse
