// tsfuse::shape_of: a stand-in for a fused expression's value (or its reduction's) to its metadata
// readers, computed without the value.
#pragma once

#include "kernels/reference/aten_eval.h"

#include <ATen/ATen.h>

namespace tsfuse {

// A stand-in for the expression's value to its metadata readers (sizes, numel, rank, dtype, device;
// passes/fuse_broadcast_reduce.cpp): one element expanded to the value's sizes (every stride 0), of
// its dtype, on its device. With `reduce`, the same for the fused reduction's value (its epilogue's
// where it has one). Where eager would raise computing the value, or the analysis cannot tell, it
// computes the value with ATen (so raises eager's error).
at::Tensor shapeOf(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce = nullptr);

}  // namespace tsfuse
