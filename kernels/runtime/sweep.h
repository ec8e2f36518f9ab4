// tsfuse::reduce_sweep: several reductions of one fused reduction's value in one sweep, e.g.
// Chamfer's row and column minima of the [N, M] distances summed over D:
//   expr     v1: sub($0, $1); mul(%0, %0)          over [N, M, D]
//   stage 0  sum(dim=[2], keepdim=False)           -> [N, M], never stored whole
//   branch 1 amin(dim=[1], keepdim=False)          -> [N]
//   branch 2 amin(dim=[0], keepdim=False)          -> [M]
// Stage 0 runs slab by slab along a dim it and every fused branch keep, as in a chain (chain.h). A branch
// that keeps that dim is computed per slab, like a chain's later stage; one that reduces it folds
// its slab partials in slab order (foldsAcrossSlabs; sums only where stage 0's value is larger
// than every operand), then runs its epilogue. A sweep may have one branch (an MMD term
// `exp(-d2 / s).mean()`). A branch may be fused over stage 0's value, as a chain's later stage
// (kernel regression's `(w[:, :, None] * y[None]).sum(1)` beside `w.sum(1)`); it is computed per
// slab, so it keeps the slab dim. Where a branch can do neither, each branch runs as its own chain.
// Operands: the expression's, stage 0's epilogue's, then each branch's (a fused branch's
// expression's other operands, then its epilogue's), in order.
#pragma once

#include "kernels/runtime/chain.h"

namespace tsfuse {

struct Sweep {
  Chain all;  // stages [stage 0, branch 1, ..., branch k] (their operands' layout)
  // Branch j as the chain [stage 0, branch j], over stage 0's and branch j's own operands.
  std::vector<std::shared_ptr<const Chain>> branches;

  static Sweep parse(c10::string_view expr, c10::ArrayRef<std::string> stages);
  // The operands of branches[j] within the sweep's operands.
  std::vector<at::Tensor> branchOperands(at::TensorList operands, size_t j) const;
};

std::shared_ptr<const Sweep> cachedSweep(c10::string_view expr, c10::ArrayRef<std::string> stages);

// The reference: stage 0 with ATen, then every branch over its value.
Outputs evalSweep(const Sweep& s, at::TensorList operands);
// The fused path (one output per branch); eager's own error where eager would raise.
Outputs runSweep(const Sweep& s, at::TensorList operands, const NativePath& native);

// Whether a branch's slab partials fold into its result: amax, amin, any, all exactly; sum and mean
// (of every dim) within the float sum tolerance.
bool foldsAcrossSlabs(const ReduceSpec& r);

}  // namespace tsfuse
