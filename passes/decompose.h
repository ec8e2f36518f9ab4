#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// Composite ATen ops (passes/analysis/decompositions.h) -> the ATen calls their kernels make, where
// the table's condition holds, so that the fusion passes see primitives: F.pairwise_distance over
// broadcast operands becomes a sub, an add and a vector norm, which fuse_broadcast_reduce fuses.
// The decomposed graph run unfused gives the op's results and errors; a guarded entry (matmul over
// an expanded operand) keeps the op for the inputs its run-time guard refuses. Returns whether it
// changed.
bool Decompose(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
