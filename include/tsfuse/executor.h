// The graph-executor integration: loading libtsfuse registers the pipeline as a pre-pass of the
// TorchScript graph executor (unless TSFUSE_DISABLE=1), so every model the process runs is
// optimized, first call included. These functions switch it, opt models out, and register or
// remove the pre-pass explicitly. Mechanism and trade-offs: docs/registration.md.
#pragma once

#include "tsfuse/options.h"

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/passes/pass_manager.h>

#include <cstddef>
#include <optional>

namespace tsfuse {

struct ExecutorRegistration {
  torch::jit::GraphPassNameType prePass = 0;   // this registration's id (tsfuse's own, not torch's)
  std::optional<size_t> previousProfiledRuns;  // PyTorch's count, put back by the last clear()
};

// Registers the pipeline as an executor pre-pass. `firstCall` sets the profiled-run count to 0
// (methods with nothing to fuse, called through torch::jit::Method, get PyTorch's count back for
// their first call: docs/registration.md).
// Thread-safe: registering and clearing while other threads run models is supported (torch's own
// pre-pass list is only touched once, by the first registration).
ExecutorRegistration registerExecutorPass(PipelineOptions options, bool firstCall);
// Removes the pre-pass; the last first-call registration cleared restores the profiled-run count.
void clearExecutorPass(const ExecutorRegistration& r);

// The registration made at load, if any.
std::optional<ExecutorRegistration> loadTimeRegistration();

// Global switch read by the executor pass at each optimization (not by optimize()/load()).
void setEnabled(bool on);
bool isEnabled();

// Marks a module (its class, so every instance and method) as not to be optimized by the
// executor pass. A scripted module can also opt out with an attribute `tsfuse_opt_out = True`.
void optOut(const torch::jit::Module& m);

}  // namespace tsfuse
