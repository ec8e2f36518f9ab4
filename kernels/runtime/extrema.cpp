// max/min along one dim where no fused op took the reduction (kernels/runtime/extrema.h).
#include "kernels/runtime/extrema.h"

#include "kernels/reference/aten_eval.h"
#include "tsfuse/ops.h"

namespace tsfuse {

namespace {

// Below this many elements ATen's loop costs less than a fused call's set-up.
constexpr int64_t kMinFusedElements = int64_t(1) << 15;

// contiguous(x) is x's values with x's gradient: the fused reductions of x itself.
constexpr const char* kItself = "v1: contiguous($0, 0)";

bool fusedKernels(const at::Tensor& x) {
  const bool floating = x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble;
  return x.device().is_cpu() && floating && x.dim() > 0 && x.numel() >= kMinFusedElements;
}

}  // namespace

at::Tensor extremumValuesOp(const at::Tensor& x, int64_t dim, bool keepdim, bool max) {
  if (!fusedKernels(x)) return extremumValues(x, dim, keepdim, max);
  // amax:index/amin:index: max/min(dim)'s values, the gradient routed to its index.
  return reduce({x}, kItself, max ? "amax:index" : "amin:index", std::vector<int64_t>{dim}, keepdim);
}

std::tuple<at::Tensor, at::Tensor> extremumOp(const at::Tensor& x, int64_t dim, bool keepdim, bool max) {
  if (!fusedKernels(x)) return max ? at::max(x, dim, keepdim) : at::min(x, dim, keepdim);
  return reduceWithIndices({x}, kItself, max ? "max" : "min", dim, keepdim);
}

at::Tensor argExtremumOp(const at::Tensor& x, int64_t dim, bool keepdim, bool max) {
  // argmax/argmin's index is max/min(dim)'s: the first extremum, or the first NaN.
  if (!fusedKernels(x)) return max ? at::argmax(x, dim, keepdim) : at::argmin(x, dim, keepdim);
  return std::get<1>(reduceWithIndices({x}, kItself, max ? "max" : "min", dim, keepdim));
}

}  // namespace tsfuse
