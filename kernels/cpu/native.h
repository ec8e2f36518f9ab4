#pragma once

#include "kernels/backend.h"

#include <string>

namespace tsfuse::cpu {

// The native CPU path (a NativePath). Returns no outputs (and the reason in *why) when it does not
// apply; the caller then takes the chunked ATen path, which is exact for everything.
Outputs runNative(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an,
                  const IterationPlan& plan, std::string* why);

}  // namespace tsfuse::cpu
