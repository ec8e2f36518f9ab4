// The chunked ATen path: the exact, device-generic fallback of every fused call.
#pragma once

#include "kernels/plan/iteration.h"
#include "kernels/reference/analysis.h"
#include "kernels/reference/eval_fused.h"

namespace tsfuse {

// Evaluates the expression with ATen on slabs of the output whose intermediates stay below the
// slab budget (kernels/backends/slabs.h), writing each slab into the output.
Outputs runChunked(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an,
                   const IterationPlan& plan);

}  // namespace tsfuse
