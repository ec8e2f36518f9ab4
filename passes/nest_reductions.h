#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// Rewrites a reduction of a fused reduction's value (tsfuse::reduce, or a chain already) into one
// tsfuse::reduce_chain (kernels/runtime/chain.h), so the reduced-once value (e.g. the [N, M] distances
// summed over D) is computed slab by slab and never stored; a softmax of such a value becomes the
// chain's last stage the same way (passes/regions/softmax_region.h, nestSoftmax). Runs after
// fuse_broadcast_reduce. Returns whether the graph changed.
bool NestReductions(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
