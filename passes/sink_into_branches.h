// sink_into_branches: an elementwise value that only reductions inside if-branches read for its
// values (elsewhere at most its metadata: a guard `if s.shape[0] == 0`) is computed in each such
// branch instead, where the reduction fuses with it; the value itself is then read for its
// metadata alone, which tsfuse::shape_of answers without computing it (effdet's ArgMaxMatcher:
// torch.max(iou, 0) in the else-branch of `if iou.shape[0] == 0`, argmax(iou, 1) under
// `if self._force_match_for_each_row`, the [N, M] IoU stored for them).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// Before fuse_broadcast_reduce. Returns whether it changed the graph.
bool SinkIntoBranches(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
