// The tsfuse pipeline: an explicit, ordered list of named passes, each one switchable. The order
// is written once, in pipelinePasses() (docs/architecture.md shows it, generated from there).
// Reductions go first so their elementwise input is claimed whole by tsfuse::reduce, and a
// reduction of such a value then nests into it before fuse_pairwise sees its epilogue.
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
  bool counted = false;  // its candidates, rewrites and rejections are a row of Report::stats()
  bool loadTime = true;  // also run by the executor's pre-pass (false: what the executor did before it)
};

// The passes in pipeline order.
const std::vector<PassInfo>& pipelinePasses();

// Runs the pipeline on one graph; events go to `report` (if given). Returns whether it changed.
bool runPipeline(std::shared_ptr<torch::jit::Graph>& graph, const PipelineOptions& options, Report* report,
                 const std::string& graphName = "");

// Runs the pipeline on every method of `module` and of its submodules (each method's graph once).
Report optimizeModule(torch::jit::Module& module, const PipelineOptions& options = {});

// Runs the pipeline on the graph of one scripted function (a torch::jit::GraphFunction), in place;
// its events are those of the graph `graphName`. Throws c10::Error for a function without a graph.
Report optimizeFunction(torch::jit::Function& function, const PipelineOptions& options, const std::string& graphName);

}  // namespace tsfuse
