// The fused ops where a gradient is needed: tsfuse::pairwise, and tsfuse::reduce of a sum or mean
// (no dtype, no epilogue), run fused forward (nothing of the region is stored but its operands and
// result), and their backward computes each operand's gradient as one more fused op: the operand's
// gradient program (kernels/reference/backward.h) over the operands and the incoming gradient
// (viewed with the reduced dims kept, divided by their count for a mean), summed over the dims the
// operand was broadcast along. Where no program can be generated (a derivative reading a None
// argument) and for a double backward (create_graph), that operand's gradient is ATen's autograd
// through the op's reference evaluation, recomputed from the saved operands.
#pragma once

#include "kernels/ir/expr.h"

#include <ATen/ATen.h>

#include <functional>
#include <optional>

namespace tsfuse {

at::Tensor pairwiseWithGradient(at::TensorList operands, c10::string_view expr);

// nullopt for a reduction this does not cover (the caller runs it unfused through ATen).
std::optional<at::Tensor> reduceWithGradient(at::TensorList operands, c10::string_view expr, c10::string_view reduction,
                                             at::OptionalIntArrayRef dim, bool keepdim,
                                             std::optional<c10::ScalarType> dtype,
                                             std::optional<c10::string_view> epilogue);

// tsfuse::reduce_chain of two sums or means (kernels/runtime/chain_grad.cpp); nullopt for a chain
// this does not cover.
std::optional<at::Tensor> reduceChainWithGradient(at::TensorList operands, c10::string_view expr,
                                                  c10::ArrayRef<std::string> stages);

// The parts every kind's backward is made of.
namespace grad {

// The dims of `value`'s shape that `operand` was broadcast along (its missing leading dims and its
// size-1 dims where the value's size is not 1).
std::vector<int64_t> broadcastDims(at::IntArrayRef operand, at::IntArrayRef value);

// The gradient of operand `wrt` of the elementwise program `e` over `operands` (of value `shape`),
// given `grad` broadcastable to that value: one fused op, the operand's gradient program summed
// over the dims it was broadcast along. nullopt where no program can be generated; an undefined
// tensor where no gradient reaches the operand.
std::optional<at::Tensor> fusedGradient(const Expr& e, int wrt, at::TensorList operands, at::IntArrayRef shape,
                                        const at::Tensor& grad);

// The gradient of operand `i` through ATen's autograd of `reference` (the op's unfused evaluation)
// recomputed from `saved`, for `incoming`; differentiable itself in a double backward.
at::Tensor atenGradient(const std::function<at::Tensor(at::TensorList)>& reference, at::TensorList saved, size_t i,
                        const at::Tensor& incoming);

}  // namespace grad

}  // namespace tsfuse
