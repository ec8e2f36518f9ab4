#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// Rewrites each maximal region of two or more elementwise ops (typically over operands that
// broadcast to an outer product, e.g. [N,1] with [1,M]) into one tsfuse::pairwise op, so no
// intermediate of the broadcast shape is materialised. An elementwise value read for its metadata
// alone (its value readers fused before, each computing it again) is not computed: its readers
// read tsfuse::shape_of of its region. Returns whether the graph changed.
bool FusePairwise(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
