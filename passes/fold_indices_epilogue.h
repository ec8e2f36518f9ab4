#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// Folds a fused elementwise op over the values and indices of a fused max/min with indices into
// that op's epilogue, whose value replaces the indices: a Matcher-style step
// `where(vals < t, full_like(idx, -1), idx)` after an IoU's max(dim=0) becomes one
// tsfuse::reduce_with_indices returning (values, matches). The same ops on the same values, so
// the same bits. Runs after chain_fused_reductions. Returns whether the graph changed.
bool FoldIndicesEpilogue(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
