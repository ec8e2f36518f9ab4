// tsfuse::product_sums(Tensor self, Tensor other) -> bool: whether matmul(self, other) runs as its
// sum of products, sum(self[..., :, :, None] * other[..., None, :, :], -2): both operands at least
// 3-d, strided, on one device, of one floating dtype (float32 or float64: matmul raises for mixed
// dtypes, and integers would sum into int64); inner sizes equal and batch dims that broadcast
// (else matmul raises its own error); one row or one column (a matrix-vector product, which no
// blocking speeds up); and a matrix operand matmul would copy (an expanded batch that does not
// flatten as a view), the memory and time the sum saves. The guard of the matmul entry of the
// decomposition table (passes/analysis/decompositions.cpp); where it is false the graph calls
// matmul itself.
#pragma once

#include <ATen/core/Tensor.h>

namespace tsfuse {

inline constexpr const char* kProductSumsOp = "tsfuse::product_sums";

bool productSums(const at::Tensor& self, const at::Tensor& other);

}  // namespace tsfuse
