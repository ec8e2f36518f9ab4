// A fused call evaluated unfused with ATen ops and recorded as the "eager" path (autograd and
// error paths).
#pragma once

#include "kernels/reference/eval_fused.h"

namespace tsfuse {

Outputs runEagerAll(const Expr& e, at::TensorList operands, const ReduceSpec* reduce);
at::Tensor runEager(const Expr& e, at::TensorList operands, const ReduceSpec* reduce);

}  // namespace tsfuse
