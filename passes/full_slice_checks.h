#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// The identity slices canonicalize kept because they may raise (x[:, None, :] on a 1-D x) become
// tsfuse::full_slice, which raises the same errors and returns its input without making a view
// (kernels/runtime/full_slice.h), in graphs that call tsfuse ops and so load libtsfuse anyway; a graph
// with nothing fused keeps aten only. Returns whether the graph changed.
bool FullSliceChecks(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
