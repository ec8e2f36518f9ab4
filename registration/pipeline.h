// The tsfuse pipeline: an explicit, ordered list of named passes, each one switchable.
//
//   1. inline                 prim::CallMethod / prim::CallFunction -> their bodies
//   2. canonicalize           tuples, constants, in-place -> out-of-place, identity slices, ...
//   3. sink_views             view(elementwise intermediate) -> elementwise(views of its leaves)
//   4. fuse_broadcast_reduce  reduction(elementwise region) -> tsfuse::reduce
//   5. fuse_pairwise          elementwise region (>= 2 ops)  -> tsfuse::pairwise
//   6. cleanup                dead code elimination
//
// Reductions go first so their elementwise input is claimed whole by tsfuse::reduce.
#pragma once

#include "tsfuse/options.h"
#include "tsfuse/report.h"

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tsfuse {

struct PassInfo {
  std::string name;
  std::string description;
  std::function<bool(std::shared_ptr<torch::jit::Graph>&)> run;
};

// The passes in pipeline order.
const std::vector<PassInfo>& pipelinePasses();

// Runs the pipeline on one graph; events go to `report` (if given). Returns whether it changed.
bool runPipeline(std::shared_ptr<torch::jit::Graph>& graph, const PipelineOptions& options,
                 Report* report, const std::string& graphName = "");

// Runs the pipeline on every method of `module` and of its submodules (each method's graph once).
Report optimizeModule(torch::jit::Module& module, const PipelineOptions& options = {});

}  // namespace tsfuse
