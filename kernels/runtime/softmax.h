// tsfuse::softmax: softmax or log_softmax along one dim of a fused expression's value, which is
// never stored.
#pragma once

#include "kernels/backends/native_path.h"

#include <cstdint>

namespace tsfuse {

// Three calls over the broadcast space, each recomputing the value: its maximum along dim (exact),
// the sum of exp(value - maximum) (a float sum in the fused kernel's order: the documented
// reduction tolerance), then exp(value - maximum) * (1 / sum), or value - (maximum + log(sum)):
// ATen's CPU formulas. Where the value is no larger than an operand (nothing to save), is not float
// or double, or is 0-dim, ATen computes it as the unfused graph did (so do its errors).
at::Tensor runSoftmax(at::TensorList operands, c10::string_view exprText, int64_t dim, bool log,
                      const NativePath& native);
// The same with ATen ops, the value stored (autograd, Meta, and runSoftmax's exact fallback).
at::Tensor softmaxAten(const Expr& e, at::TensorList operands, int64_t dim, bool log);

// Softmax of a value of at most this many elements stores the value and runs ATen's softmax on it
// (one pass: faster there than three fused sweeps, and eager's bits). Default kSlabElements;
// kernel tests set 0 to run the fused sweeps on small shapes.
void setSoftmaxStoredLimit(int64_t elements);
int64_t softmaxStoredLimit();

}  // namespace tsfuse
