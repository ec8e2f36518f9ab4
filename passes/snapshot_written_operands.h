#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// Reads each operand of a fused op that a later node writes in place through
// tsfuse::saved_operand, which under grad mode hands the op a copy (the values its backward
// recomputes from) and otherwise the operand itself. Returns whether the graph changed.
bool SnapshotWrittenOperands(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
