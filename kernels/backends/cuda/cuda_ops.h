// The CUDA NativePath (kernels/backends/cuda/cuda_ops.cpp): built only with CUDA (TSFUSE_WITH_CUDA).
#pragma once

#include "kernels/backends/native_path.h"

#include <string>

namespace tsfuse::cuda {

// Runs the call's generated kernel (kernels/backends/cuda/codegen): every map and every reduction (max/min
// with their indices), with an epilogue that keeps the reduced shape. The rest — a dtype or
// primitive without a device form, an epilogue that changes the shape, no NVRTC — declines (no
// outputs, the reason in *why) to the exact chunked path, as does every call with
// TSFUSE_CUDA_KERNELS=0.
Outputs runCuda(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an,
                const IterationPlan& plan, std::string* why);

}  // namespace tsfuse::cuda
