// runFusedAll: the one routine behind every backend's kernel of tsfuse::pairwise / tsfuse::reduce,
// which picks among the eager, ATen, native and chunked paths for one call.
#pragma once

#include "kernels/backends/native_path.h"

#include <memory>

namespace tsfuse {

// A fused call's operands are tensors: errors on an undefined one (naming its index).
void checkOperandsDefined(at::TensorList operands);
// The call's expression (parsed once per text), after checking its operands: their count for the
// expression (and `reduce`'s epilogue), and that each is defined.
std::shared_ptr<const Expr> checkedExpr(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce);

// The steps of a call:
//   1. parse (cached) and check the operands;
//   2. analyse on meta tensors: dtypes, shapes, strides — or "eager would raise", in which case
//      eager runs and raises its own error (never a different one);
//   3. empty output: allocate and return; a CPU sum or product of two to four values per output:
//      the map folding them, in eager's order (kernels/runtime/small_reduction.h);
//   4. the call's IterationPlan (kernels/plan/iteration.h), computed once for both paths;
//   5. a float sum-like reduction of a value no larger than its largest operand runs with ATen
//      (eager's fold order, so eager's bits: fusing it would save no broadcast intermediate;
//      kernels/runtime/eager_order.h);
//   6. the backend's native path (`native`, may decline), else the chunked ATen path.
// `donated`: indices of operands the caller gives up (the fused op's `donated` argument, set by
// passes/donate_operands.cpp where the graph never reads them again). An elementwise call writes
// its output into such an operand's memory when takeDonated (kernels/runtime/donation.h) allows:
// the unfused graph frees a dead operand after its first reader, and so, then, does the fused op.
Outputs runFusedAll(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce,
                    const NativePath& native, at::IntArrayRef donated = {});
at::Tensor runFused(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce,
                    const NativePath& native, at::IntArrayRef donated = {});

// The memory the last call with donated operands on this thread wrote its output over (nullptr:
// none); for tests.
const void* lastDonatedMemory();

}  // namespace tsfuse
