// zero_dim_numbers: a 0-dim tensor constant passed as add/sub/mul/div's `other` becomes a number,
// as the graph executor's required CanonicalizeOps (torch/csrc/jit/passes/
// canonicalize_graph_fuser_ops.cpp) makes it before its own constant propagation. A trace records
// `n + 1e-16` so, and the number changes type promotion (int64 0-dim + 1e-16 is float32, not the
// float64 of the recorded constant): a fused op must compute what TorchScript computes.
//
//   %c : Double() = prim::Constant[value={1e-16}]()     %c : float = prim::Constant[value=1e-16]()
//   %y = aten::add(%x, %c, %one)                    ->  %y = aten::add(%x, %c, %one)   (Scalar)
//
// Offline only (optimize-ts, tsfuse::optimize / load): the executor has already done it to the
// graph its pre-pass receives, and a 0-dim constant left there is one its constant propagation
// made afterwards, which TorchScript keeps as a tensor (f16 0-dim * tensor(1.5) is float32 there,
// not the float16 a number would give).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <unordered_set>

namespace tsfuse {

bool ZeroDimNumbers(std::shared_ptr<torch::jit::Graph>& graph);

// The other side of the same rule, for constants a pass folds: a 0-dim tensor constant not in
// `before` (folded from `torch.tensor(0.5)`, `torch.zeros([])`, ...) read as add/sub/mul/div's
// other becomes aten::tensor(c, dtype, device, False) again there. TorchScript folds such a value
// after its CanonicalizeOps, so it stays a tensor in the unoptimized run; a constant in a saved
// graph would become a number when the graph is loaded (bf16 0-dim * tensor(0.5) would be
// bfloat16, not float32). Returns whether a use changed.
bool UnfoldZeroDimOthers(torch::jit::Graph& graph, const std::unordered_set<torch::jit::Node*>& before);

}  // namespace tsfuse
