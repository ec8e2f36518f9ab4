// A backend's native path for a fused call (the CPU's runNative, CUDA's runCuda): the signature
// the routine that picks a path (kernels/runtime/fused_call.h) calls, and which may decline.
#pragma once

#include "kernels/plan/iteration.h"
#include "kernels/reference/analysis.h"
#include "kernels/reference/eval_fused.h"

#include <functional>
#include <string>

namespace tsfuse {

// Returns no outputs (and the reason in *why) when it declines.
using NativePath = std::function<Outputs(const Expr&, at::TensorList, const ReduceSpec*, const Analysis&,
                                         const IterationPlan&, std::string* why)>;

}  // namespace tsfuse
