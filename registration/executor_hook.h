// Load-time integration with the TorchScript graph executor (the public part: tsfuse/executor.h).
//
// Loading libtsfuse.so registers the fused ops and, unless TSFUSE_DISABLE=1, the pipeline as a
// custom pre-pass of the graph executor, so every TorchScript model the process runs is optimized
// with no code change. The profiled-run count is set to 0 so the first call is fused
// (registration/first_call.h); NNC fusion, which needs profiled shapes, then does not fire (see
// docs/registration.md). Environment: TSFUSE_DISABLE=1, TSFUSE_PASSES=a,b (only these passes),
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

// `options` as the executor's pre-pass runs them: without the passes that repeat what the executor
// did to its graph before calling the pre-pass (PassInfo::loadTime false).
PipelineOptions executorPipelineOptions(PipelineOptions options);

// How many executor pipeline runs have thrown in this process (each left its graph as it was):
// what the differential fuzzer counts as a failure, since the model's results stay right.
int64_t executorPipelineFailures();

// "2.11.0" — the torch version the library was built against, and the one it runs in.
std::string builtTorchVersion();
std::string runtimeTorchVersion();

}  // namespace tsfuse
