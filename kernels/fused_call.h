// The one routine behind every backend's kernel of tsfuse::pairwise / tsfuse::reduce.
//
//   1. parse (cached) and check the operands;
//   2. analyse on meta tensors: dtypes, shapes, strides — or "eager would raise", in which case
//      eager runs and raises its own error (never a different one);
//   3. empty output: allocate and return;
//   4. the backend's native path (`native`, may decline), else the chunked ATen path.
#pragma once

#include "kernels/analysis.h"

#include <functional>

namespace tsfuse {

using NativePath = std::function<at::Tensor(const Expr&, at::TensorList, const ReduceSpec*,
                                            const Analysis&, std::string* why)>;

at::Tensor runFused(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce,
                    const NativePath& native);

ReduceSpec makeReduceSpec(c10::string_view reduction, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<c10::ScalarType> dtype);

// Unfused evaluation with ATen ops (the reference; used for autograd and error paths).
at::Tensor runEager(const Expr& e, at::TensorList operands, const ReduceSpec* reduce);

// The exact, device-generic path: evaluates the expression with ATen on slabs of the output whose
// intermediates stay below a fixed element budget, writing each slab into the output.
at::Tensor runChunked(const Expr& e, at::TensorList operands, const ReduceSpec* reduce,
                      const Analysis& an);

void setLastPath(const char* path);

// The device of the operands, ignoring 0-dim CPU tensors (which eager lets mix with any device);
// nullopt when the operands mix devices otherwise.
std::optional<c10::Device> commonDevice(at::TensorList operands);
c10::Device mainDevice(at::TensorList operands);

}  // namespace tsfuse
