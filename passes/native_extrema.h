#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// max/min(dim) (values and indices) and argmax/argmin(dim) that no fused op took become
// tsfuse::extremum / tsfuse::arg_extremum, which give the same results, errors and gradient and
// reduce a large float CPU tensor with the fused kernels, where ATen's loops are slow
// (kernels/runtime/extrema.h). Returns whether the graph changed.
bool NativeExtrema(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
