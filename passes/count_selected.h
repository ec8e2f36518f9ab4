// count_selected: the length of a boolean selection that nothing else reads is its mask's count,
// so the selection (ATen's nonzero of the mask, then a gather of the selected values) is never
// made, and the mask is one more reduction of its region. Metric-learning losses count their
// positive triplets so: `triplet_loss[triplet_loss > 1e-16].size(0)`.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// x[m] read only by size(0), numel or len, with x provably at least 1-d and m provably bool and of
// x's shape (index raises for a 0-dim x and for another shape; else a bool mask never raises) ->
// int(m.sum()). Otherwise kept; a selection read only for its length is rejected with the
// reason. Returns whether it changed.
bool CountSelected(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
