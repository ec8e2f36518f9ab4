// A fused call so small that the ATen ops it replaced cost less than its own fixed work runs as
// those ops. A fused call pays for its analysis, iteration plan, program lowering and kernel lookup
// before it computes anything: about 2.5 us for a map and 5-10 us for a reduction (whose paths also
// try unrolling, hoisting and integer compares), where one ATen op costs about 0.5 us. A centre
// loss over [128, 10] or a tracker's IoU of a few boxes would otherwise run slower than unfused
// TorchScript. Such a call is evaluated op by op (evalFused, the reference: eager's bits by
// construction); its values are too few for any intermediate to matter.
#pragma once

#include "kernels/reference/aten_eval.h"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace tsfuse {

// Whether the call runs as its ATen ops, on the CPU: a reduction of at most 8 ops (its
// instructions, the reduction and its epilogue's) over a broadcast space of at most
// smallCallValues() values, or a map of at most 4 ops whose space times its op count is at most
// twice that. Beyond those the ops cost more than the fused call.
bool runsAsAtenOps(const Expr& e, at::TensorList operands, const ReduceSpec* reduce);

// 2048 by default; TSFUSE_SMALL_CALL_VALUES=N sets another bound, 0 none (the tests and the fuzzer
// run their small shapes through the fused kernels, as stand-ins for large ones).
int64_t smallCallValues();
void setSmallCallValues(int64_t n);

}  // namespace tsfuse
