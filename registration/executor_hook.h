// Load-time integration with the TorchScript graph executor (the public part: tsfuse/executor.h).
//
// Loading libtsfuse.so registers the fused ops (TORCH_LIBRARY) and, unless TSFUSE_DISABLE=1, the
// pipeline as a custom pre-pass of the graph executor, so every TorchScript model the process
// runs is optimized with no code change.
//
// First call. The profiling executor runs custom pre-passes only when it builds the optimized
// plan, after getNumProfiledRuns() profiling calls (default 1): the first call would run
// unfused. tsfuse therefore sets the number of profiled runs to 0 at load (TSFUSE_FIRST_CALL=0
// keeps PyTorch's default), so the first call builds the optimized plan and is already fused;
// methods whose first call stores no broadcast intermediate to fuse get PyTorch's count back
// (registration/first_call.h).
// Trade-off: the executor then has no profiled shapes, so NNC (TensorExpr) fusion, which needs
// them, does not fire — relevant on GPU; on CPU NNC is off by default. See docs/registration.md.
//
// Environment: TSFUSE_DISABLE=1 (no pass), TSFUSE_PASSES=a,b (only these pipeline passes),
// TSFUSE_FIRST_CALL=0 (keep profiling runs), TSFUSE_LOG_LEVEL=debug|info|....
#pragma once

#include "registration/pipeline.h"
#include "tsfuse/executor.h"

#include <string>

namespace tsfuse {

// Why `g` should be fused on its first call, or nullptr: a pass is registered and enabled, the
// model has not opted out, and the graph holds a fusion candidate, which is returned: given
// `inputs` (the call's values, self first), one over an outer product (passes/analysis/broadcast_probe.h);
// without them (empty), any (passes/analysis/op_table.h, firstFusionCandidate).
const torch::jit::Node* firstCallCandidate(const std::shared_ptr<torch::jit::Graph>& g,
                                          c10::ArrayRef<c10::IValue> inputs);

// PipelineOptions from TSFUSE_PASSES (comma-separated pass names to keep); throws on unknown.
PipelineOptions optionsFromEnvironment();

// How many executor pipeline runs have thrown in this process (each left its graph as it was):
// what the differential fuzzer counts as a failure, since the model's results stay right.
int64_t executorPipelineFailures();

// "2.11.0" — the torch version the library was built against, and the one it runs in.
std::string builtTorchVersion();
std::string runtimeTorchVersion();

}  // namespace tsfuse
