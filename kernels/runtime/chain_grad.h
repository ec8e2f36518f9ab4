// The parts of reduce_chain's fused backward (chain_grad.cpp) that reduce_sweep's reuses
// (sweep_grad.cpp): a sweep's branch is the chain [stage 0, branch].
#pragma once

#include "kernels/runtime/chain.h"

namespace tsfuse::grad {

// Why `c` does not train fused (empty: it does).
std::string whyNotFused(const Chain& c);

// Whether eager's value of `c` over `ops` would require grad: its expression's does
// (recordsGradient) or an operand of a later stage requires grad (conservative: a later stage's
// derivative may not cover it). Where not, the chain runs without an autograd node.
bool recordsGradient(const Chain& c, at::TensorList ops);

// Whether the backward reads stage 1's result r1 (before its epilogue), saved by the forward.
bool savesR1(const Chain& c);

// Each needed operand's fused gradient (nullopt: ATen's), given the saved r1 (where savesR1) and the
// incoming gradient g.
std::vector<std::optional<at::Tensor>> chainGradients(const Chain& c, at::TensorList ops, const at::Tensor& r1,
                                                      const at::Tensor& g, const std::vector<bool>& needed);

// chainGradients where stage 1 is max/min(dim)'s values (chain_routed.cpp): the gradient at the
// index each output routes to, over the operands read there (O(outputs) values, not the space);
// nullopt for other chains.
std::optional<std::vector<std::optional<at::Tensor>>> routedChainGradients(const Chain& c, at::TensorList ops,
                                                                           const at::Tensor& g,
                                                                           const std::vector<bool>& needed);

// Stage texts as one string (an autograd context's saved data), and back.
std::string joinStages(c10::ArrayRef<std::string> stages);
std::vector<std::string> splitStages(const std::string& joined);

}  // namespace tsfuse::grad
