#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// Rewrites a reduction (sum, mean, prod, amax, amin, any, all, argmax, argmin) of an elementwise
// region into one tsfuse::reduce op, so the broadcast value (e.g. [S,D,D] from x[:,:,None] -
// y[:,None,:]) is never materialised. Returns whether the graph changed.
bool FuseBroadcastReduce(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
