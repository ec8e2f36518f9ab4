#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// Marks the operands of each tsfuse::pairwise / tsfuse::reduce that no later node reads (tensors
// of the op's block whose one use is its operand list) in the op's `donated` argument, so that
// the op may write its elementwise result over one of them, where at run time nothing else holds
// it, instead of keeping it alive next to a new output (kernels/runtime/donation.h). Returns whether
// the graph changed.
bool DonateOperands(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
