// The one routine behind every backend's kernel of tsfuse::pairwise / tsfuse::reduce.
//
//   1. parse (cached) and check the operands;
//   2. analyse on meta tensors: dtypes, shapes, strides — or "eager would raise", in which case
//      eager runs and raises its own error (never a different one);
//   3. empty output: allocate and return;
//   4. the call's IterationPlan (kernels/plan/iteration.h), computed once for both paths;
//   5. the backend's native path (`native`, may decline), else the chunked ATen path.
#pragma once

#include "kernels/analysis.h"
#include "kernels/plan/iteration.h"

#include <functional>

namespace tsfuse {

// The op's outputs: one tensor, or (values, indices) for max/min with indices.
using Outputs = std::vector<at::Tensor>;

// Returns no outputs (and the reason in *why) when it declines.
using NativePath = std::function<Outputs(const Expr&, at::TensorList, const ReduceSpec*,
                                         const Analysis&, const IterationPlan&, std::string* why)>;

Outputs runFusedAll(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce,
                    const NativePath& native);
at::Tensor runFused(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce,
                    const NativePath& native);

// `reduction` is the op's text ("sum", "norm:2.0", ...); `epilogue` an expression text or none.
ReduceSpec makeReduceSpec(c10::string_view reduction, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<c10::ScalarType> dtype,
                          std::optional<c10::string_view> epilogue = std::nullopt);

// tsfuse::reduce_with_indices: max/min over one dim.
ReduceSpec makeIndicesSpec(c10::string_view reduction, int64_t dim, bool keepdim);

// Unfused evaluation with ATen ops (the reference; used for autograd and error paths).
Outputs runEagerAll(const Expr& e, at::TensorList operands, const ReduceSpec* reduce);
at::Tensor runEager(const Expr& e, at::TensorList operands, const ReduceSpec* reduce);
// The same evaluation without recording a path (the chunked path's single slab, Meta).
Outputs evalFused(const Expr& e, at::TensorList operands, const ReduceSpec* reduce);

// The exact, device-generic path: evaluates the expression with ATen on slabs of the output whose
// intermediates stay below a fixed element budget, writing each slab into the output.
Outputs runChunked(const Expr& e, at::TensorList operands, const ReduceSpec* reduce,
                   const Analysis& an, const IterationPlan& plan);

void setLastPath(const char* path);

// The device of the operands, ignoring 0-dim CPU tensors (which eager lets mix with any device);
// nullopt when the operands mix devices otherwise.
std::optional<c10::Device> commonDevice(at::TensorList operands);
c10::Device mainDevice(at::TensorList operands);

}  // namespace tsfuse
