// The reference evaluation of a fused call: its expression, reduction and epilogue with ATen ops.
// What every fast path must return; the chunked path's single slab, Meta, autograd and the error
// paths call it directly.
#pragma once

#include "kernels/reference/analysis.h"

#include <vector>

namespace tsfuse {

// The op's outputs: one tensor, or (values, indices) for max/min with indices.
using Outputs = std::vector<at::Tensor>;

// Throws c10::Error unless n is the number of operands of the expression and then of the
// reduction's epilogue (its $1, $2, ...).
void checkFusedOperandCount(const Expr& e, const ReduceSpec* reduce, size_t n);

// Unfused evaluation with ATen ops, without recording a path. Checks the operand count first.
Outputs evalFused(const Expr& e, at::TensorList operands, const ReduceSpec* reduce);
// The reduction (and epilogue) of evalFused, with ATen, over an already computed value.
Outputs reduceWithAten(const Expr& e, at::TensorList operands, const ReduceSpec& reduce, at::Tensor value);

}  // namespace tsfuse
