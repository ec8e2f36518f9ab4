// The CUDA NativePath (kernels/cuda/cuda_ops.cpp): built only with CUDA (TSFUSE_WITH_CUDA).
#pragma once

#include "kernels/backend.h"

#include <string>

namespace tsfuse::cuda {

// The kernels cover one-output reductions without an epilogue and every map; logsumexp, norm,
// max/min with indices and epilogues decline (no outputs, the reason in *why) to the exact chunked
// path, as does everything while the kernels are opt-in (TSFUSE_CUDA_KERNELS=1).
Outputs runCuda(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an,
                const IterationPlan& plan, std::string* why);

}  // namespace tsfuse::cuda
