#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// Moves the elementwise ops that a fused op computes on an unsqueezed fused reduction's value
// alone into that reduction's epilogue: they then run once per reduced element instead of once per
// element of the broadcast (a Gaussian kernel's exp, weighted by 16 columns: 16 times fewer exps).
// The same ops on the same values in the same dtype, so the same bits. Runs after the fusion
// passes. Returns whether the graph changed.
bool HoistIntoEpilogue(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
