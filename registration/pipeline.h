// The tsfuse pipeline: an explicit, ordered list of named passes, each one switchable.
//
//   1. inline                 prim::CallMethod / prim::CallFunction -> their bodies
//   2. canonicalize           tuples, constants, in-place -> out-of-place, identity slices, ...
//   3. fold_upcast            prim::If computing torchvision's _upcast -> tsfuse::upcast
//   4. sink_views             view(elementwise intermediate) -> elementwise(views of its leaves)
//   5. fuse_broadcast_reduce  reduction(elementwise region) -> tsfuse::reduce
//   6. nest_reductions        reduction(tsfuse::reduce)      -> tsfuse::reduce_chain
//   7. fuse_pairwise          elementwise region (>= 2 ops)  -> tsfuse::pairwise
//   8. hoist_into_epilogue    ops over a reduction's value alone -> that reduction's epilogue
//   9. chain_fused_reductions tsfuse::reduce(tsfuse::reduce)  -> tsfuse::reduce_chain
//  10. fold_indices_epilogue  pairwise over values + indices -> the reduction's epilogue
//  11. cleanup                the nodes rewrites left dead (eraseDeadCode: no alias analysis)
//  12. donate_operands        operands only a fused op reads -> its `donated` argument
//  13. full_slice_checks      identity slices kept for their errors -> tsfuse::full_slice (no view)
//
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
};

// The passes in pipeline order.
const std::vector<PassInfo>& pipelinePasses();

// Runs the pipeline on one graph; events go to `report` (if given). Returns whether it changed.
bool runPipeline(std::shared_ptr<torch::jit::Graph>& graph, const PipelineOptions& options,
                 Report* report, const std::string& graphName = "");

// Runs the pipeline on every method of `module` and of its submodules (each method's graph once).
Report optimizeModule(torch::jit::Module& module, const PipelineOptions& options = {});

}  // namespace tsfuse
