#pragma once

#include "kernels/analysis.h"

#include <string>

namespace tsfuse::cpu {

// The native CPU path. Returns an undefined tensor (and the reason in *why) when it does not
// apply; the caller then takes the chunked ATen path, which is exact for everything.
at::Tensor runNative(const Expr& e, at::TensorList operands, const ReduceSpec* reduce,
                     const Analysis& an, std::string* why);

}  // namespace tsfuse::cpu
