#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// Rewrites each maximal region of two or more elementwise ops (typically over operands that
// broadcast to an outer product, e.g. [N,1] with [1,M]) into one tsfuse::pairwise op, so no
// intermediate of the broadcast shape is materialised. Returns whether the graph changed.
bool FusePairwise(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
