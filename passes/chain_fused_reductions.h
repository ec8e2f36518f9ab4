#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// Rewrites a fused reduction (tsfuse::reduce or reduce_with_indices) over a fused reduction's
// value (tsfuse::reduce or reduce_chain; directly or unsqueezed) into one tsfuse::reduce_chain
// whose last stage is the consumer, fused (kernels/runtime/chain.h): the Gaussian kernel product with a
// weight matrix never stores its [N, M] kernel values. Runs after hoist_into_epilogue, which
// leaves the consumer only the ops that read other operands too. Returns whether the graph changed.
bool ChainFusedReductions(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
