// Load-time integration with the TorchScript graph executor.
//
// Loading libtsfuse.so registers the fused ops (TORCH_LIBRARY) and, unless TSFUSE_DISABLE=1, the
// pipeline as a custom pre-pass of the graph executor, so every TorchScript model the process
// runs is optimized with no code change.
//
// First call. The profiling executor runs custom pre-passes only when it builds the optimized
// plan, after getNumProfiledRuns() profiling calls (default 1): the first call would run
// unfused. tsfuse therefore sets the number of profiled runs to 0 at load (TSFUSE_FIRST_CALL=0
// keeps PyTorch's default), so the first call builds the optimized plan and is already fused.
// Trade-off: the executor then has no profiled shapes, so NNC (TensorExpr) fusion, which needs
// them, does not fire — relevant on GPU; on CPU NNC is off by default. See docs/registration.md.
//
// Environment: TSFUSE_DISABLE=1 (no pass), TSFUSE_PASSES=a,b (only these pipeline passes),
// TSFUSE_FIRST_CALL=0 (keep profiling runs), TSFUSE_LOG_LEVEL=debug|info|....
#pragma once

#include "registration/pipeline.h"

#include <torch/csrc/jit/passes/pass_manager.h>

#include <memory>
#include <optional>

namespace tsfuse {

struct ExecutorRegistration {
  torch::jit::GraphPassNameType prePass = 0;  // this registration's id (tsfuse's own, not torch's)
  std::optional<size_t> previousProfiledRuns;  // restored by clear()
};

// Registers the pipeline as an executor pre-pass. `firstCall` sets the profiled-run count to 0.
// Thread-safe: registering and clearing while other threads run models is supported (torch's own
// pre-pass list is only touched once, by the first registration; see executor_hook.cpp).
ExecutorRegistration registerExecutorPass(PipelineOptions options, bool firstCall);
// Removes the pre-pass and restores the profiled-run count.
void clearExecutorPass(const ExecutorRegistration& r);

// The registration made at load, if any.
std::optional<ExecutorRegistration> loadTimeRegistration();

// Global switch read by the executor pass at each optimization (not by optimize()/load()).
void setEnabled(bool on);
bool isEnabled();

// Marks a module (its class, so every instance and method) as not to be optimized by the
// executor pass. A scripted module can also opt out with an attribute `tsfuse_opt_out = True`.
void optOut(const torch::jit::Module& m);

// PipelineOptions from TSFUSE_PASSES (comma-separated pass names to keep); throws on unknown.
PipelineOptions optionsFromEnvironment();

// "2.11.0" — the torch version the library was built against, and the one it runs in.
std::string builtTorchVersion();
std::string runtimeTorchVersion();

}  // namespace tsfuse
