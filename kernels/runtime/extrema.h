// max/min along one dim where no fused op took the reduction: tsfuse::extremum_values (canonicalize's
// form of a max/min(dim) whose indices nothing reads), tsfuse::extremum (max/min(dim), values and
// indices) and tsfuse::arg_extremum (argmax/argmin(dim)), the latter two from passes/native_extrema.
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace tsfuse {

// Each gives its ATen op's results bit for bit, its errors and its gradient (to the one index
// eager's max/min picks). A large float CPU tensor is reduced by the fused reduction kernels over
// the tensor itself: ATen's max/min(dim) and argmax/argmin walk each output's values one by one,
// across rows where dim is not the innermost (a [4, 2048, 2048] min over dim 1: 39 ms, the fused
// kernels' vertical fold 2.6 ms; torchvision's Matcher's max over dim 0 of a [50, 100000] IoU
// matrix: 16 ms, 0.5 ms). Everything else is the ATen op.
at::Tensor extremumValuesOp(const at::Tensor& x, int64_t dim, bool keepdim, bool max);
std::tuple<at::Tensor, at::Tensor> extremumOp(const at::Tensor& x, int64_t dim, bool keepdim, bool max);
at::Tensor argExtremumOp(const at::Tensor& x, int64_t dim, bool keepdim, bool max);

}  // namespace tsfuse
