// C++ entry points of the fused ops (they go through the dispatcher, like torch.ops.tsfuse.*).
//
//   tsfuse::pairwise(Tensor[] operands, str expr) -> Tensor
//   tsfuse::reduce(Tensor[] operands, str expr, str reduction, int[]? dim=None,
//                  bool keepdim=False, ScalarType? dtype=None) -> Tensor
//
// `expr` is the text form of tsfuse::Expr (include/tsfuse/expr.h). The result is exactly what
// evaluating the expression with eager ATen ops (then the reduction) returns: same dtype, shape,
// strides, values (float elementwise ops bit-identical; reductions within rounding), same errors.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

namespace tsfuse {

at::Tensor pairwise(at::TensorList operands, const std::string& expr);
at::Tensor reduce(at::TensorList operands, const std::string& expr, const std::string& reduction,
                  std::optional<std::vector<int64_t>> dim = std::nullopt, bool keepdim = false,
                  std::optional<c10::ScalarType> dtype = std::nullopt);

// Which implementation the last fused call on this thread used: "native", "chunked", "eager"
// (autograd or an error path) or "empty". For tests and the explain tooling.
const char* lastPath();

}  // namespace tsfuse
