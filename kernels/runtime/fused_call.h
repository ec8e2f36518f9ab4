// The one routine behind every backend's kernel of tsfuse::pairwise / tsfuse::reduce.
//
//   1. parse (cached) and check the operands;
//   2. analyse on meta tensors: dtypes, shapes, strides — or "eager would raise", in which case
//      eager runs and raises its own error (never a different one);
//   3. empty output: allocate and return;
//   4. the call's IterationPlan (kernels/plan/iteration.h), computed once for both paths;
//   5. a float sum-like reduction of a value no larger than its largest operand runs with ATen
//      (eager's fold order, so eager's bits: fusing it would save no broadcast intermediate);
//   6. the backend's native path (`native`, may decline), else the chunked ATen path.
#pragma once

#include "kernels/backends/backend.h"

namespace tsfuse {

// A fused call's operands are tensors: errors on an undefined one (naming its index).
void checkOperandsDefined(at::TensorList operands);
// The call's expression (parsed once per text), after checking its operands: their count for the
// expression (and `reduce`'s epilogue), and that each is defined.
std::shared_ptr<const Expr> checkedExpr(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce);

// tsfuse::shape_of: a stand-in for the expression's value to its metadata readers (sizes, numel,
// rank, dtype, device; passes/fuse_broadcast_reduce.cpp): one element expanded to the value's
// sizes (every stride 0), of its dtype, on its device. Where eager would raise computing the
// value, or the analysis cannot tell, it computes the value with ATen (so raises eager's error).
at::Tensor shapeOf(at::TensorList operands, c10::string_view exprText);

// `donated`: indices of operands the caller gives up (the fused op's `donated` argument, set by
// passes/donate_operands.cpp where the graph never reads them again). An elementwise call writes
// its output into such an operand's memory when it is a CPU tensor laid out exactly as the output
// would be (dtype, sizes, strides, dense) that nothing but this call holds (takeDonated, below):
// the unfused graph frees a dead operand after its first reader, and so, then, does the fused op.
Outputs runFusedAll(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce,
                    const NativePath& native, at::IntArrayRef donated = {});
at::Tensor runFused(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce,
                    const NativePath& native, at::IntArrayRef donated = {});

// The donated operand an elementwise call's output may take (undefined: none). Besides the layout,
// the tensor must be held by nothing but this call: by at most kCallReferences handles, its
// storage by no other tensor (no live view of it; a view's base that only the view holds counts
// as part of it), and its memory must come from ATen's CPU allocator (not from_blob's). The
// interpreter moves the operand list into the call, where the dispatcher copies it into the
// kernel's vector and frees it: a dead operand then has one handle, one that a register still
// holds for a later reader has two.
constexpr long kCallReferences = 1;
// The memory the last call with donated operands on this thread wrote its output over (nullptr:
// none); for tests.
const void* lastDonatedMemory();
at::Tensor takeDonated(at::TensorList operands, at::IntArrayRef donated, const Analysis& an);

// tsfuse::softmax: softmax (or log_softmax, `log`) along `dim` of the expression's value, which is
// never stored. Three calls over the broadcast space, each recomputing the value: its maximum
// along dim (exact), the sum of exp(value - maximum) (a float sum in the fused kernel's order:
// the documented reduction tolerance), then exp(value - maximum) * (1 / sum), or
// value - (maximum + log(sum)): ATen's CPU formulas. Where the value is no larger than an operand
// (nothing to save), is not float or double, or is 0-dim, ATen computes it as the unfused graph
// did (so do its errors).
at::Tensor runSoftmax(at::TensorList operands, c10::string_view exprText, int64_t dim, bool log,
                      const NativePath& native);
// The same with ATen ops, the value stored (autograd, Meta, and runSoftmax's exact fallback).
at::Tensor softmaxAten(const Expr& e, at::TensorList operands, int64_t dim, bool log);

// Softmax of a value of at most this many elements stores the value and runs ATen's softmax on it
// (one pass: faster there than three fused sweeps, and eager's bits). Default kSlabElements;
// kernel tests set 0 to run the fused sweeps on small shapes.
void setSoftmaxStoredLimit(int64_t elements);
int64_t softmaxStoredLimit();

// Whether the expression's value has more elements than its largest operand holds (stride-0 dims
// count once): only then does fusing a reduction keep a broadcast intermediate from being stored.
bool broadcastsBeyondOperands(const Analysis& an, at::TensorList operands);
// The most elements one of the operands holds (stride-0 dims counted once).
int64_t largestFootprint(at::TensorList operands);

// Step 5's policy, process-wide: on by default; TSFUSE_REDUCE_ORDER=any at load (or
// setKeepEagerOrder(false)) lets the fused kernels fold such reductions too (kernel tests do, to
// cover every layout).
bool keepsEagerOrder();
void setKeepEagerOrder(bool on);

// `reduction` is the op's text ("sum", "norm:2.0", ...); `epilogue` an expression text or none.
ReduceSpec makeReduceSpec(c10::string_view reduction, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<c10::ScalarType> dtype,
                          std::optional<c10::string_view> epilogue = std::nullopt);

// tsfuse::reduce_with_indices: max/min over one dim, with an epilogue over (values, indices) or none.
ReduceSpec makeIndicesSpec(c10::string_view reduction, int64_t dim, bool keepdim,
                           std::optional<c10::string_view> epilogue = std::nullopt);

// Unfused evaluation with ATen ops, recorded as the "eager" path (autograd and error paths).
Outputs runEagerAll(const Expr& e, at::TensorList operands, const ReduceSpec* reduce);
at::Tensor runEager(const Expr& e, at::TensorList operands, const ReduceSpec* reduce);

}  // namespace tsfuse
