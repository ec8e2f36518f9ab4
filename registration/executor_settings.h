// Executor settings under which the load-time pass cannot run, and the one warning for each.
//
// The graph executor runs registered pre-passes only when it builds an optimized plan. With
// graph-executor optimization off (torch::jit::setGraphExecutorOptimize(false), a thread-local
// setting), or with the profiling mode off while the profiling executor is selected (torch then
// makes the simple executor), it plans the graph as it is and calls no registered pass. No public
// hook reaches the graph that plan is made from: the executor copies the function's graph into a
// private member when it is created, before its first plan. So tsfuse cannot fuse there; it says
// so, once per process and setting, at warning level, with the remedy: a model rewritten ahead of
// time (optimize-ts, tsfuse::optimize / tsfuse::load, tsfuse.optimize) runs its fused ops under any
// executor setting. The other settings (the legacy executor, the profiled-run count, the
// tensor-expr fuser, inference mode, no_grad) leave the pre-pass running: docs/registration.md.
#pragma once

#include <cstddef>
#include <optional>

namespace tsfuse {

enum class ExecutorSetting { optimizeOff, profilingModeOff };

// The setting that keeps the executor from running registered passes on the calling thread now.
std::optional<ExecutorSetting> settingBlockingPasses();

// Installs the watcher, once per process (later calls do nothing): a torch::jit::logging logger,
// which the executor calls on each run before it chooses a plan, forwarding everything to the
// logger it replaced. At a run under a blocking setting, it logs that setting's warning (if not yet
// logged) when the thread's previous run executed a graph with a fusion candidate while the
// load-time pass is registered and switched on: torch runs graphs of its own with optimization off
// (default arguments), which that test passes over. A logger set after it replaces it.
void watchExecutorSettings();

// How many of those warnings this process has logged (each setting's at most once), for tests.
size_t executorSettingWarnings();

}  // namespace tsfuse
