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

#include "passes/events.h"

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <memory>
#include <set>
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

struct PipelineOptions {
  std::set<std::string> disabled;  // pass names to skip
  // Called with the graph as it enters the pipeline (stage "") and after each pass that ran
  // (stage = the pass name); optimize-ts --diff/--html snapshot graphs with it.
  std::function<void(const std::string& graphName, const std::string& stage, const torch::jit::Graph&)> observe;
  // Throws std::invalid_argument naming the unknown pass, if any.
  void validate() const;
};

struct PassStats {
  std::string name;
  int candidates = 0;
  int rewrites = 0;
  int rejections = 0;
};

struct Report {
  std::vector<FusionEvent> events;
  std::vector<std::string> graphs;  // names of the graphs the pipeline ran on
  std::vector<PassStats> stats() const;
  int rewrites() const;
};

// Runs the pipeline on one graph; events go to `report` (if given). Returns whether it changed.
bool runPipeline(std::shared_ptr<torch::jit::Graph>& graph, const PipelineOptions& options,
                 Report* report, const std::string& graphName = "");

// Runs the pipeline on every method of `module` and of its submodules (each method's graph once).
Report optimizeModule(torch::jit::Module& module, const PipelineOptions& options = {});

}  // namespace tsfuse
