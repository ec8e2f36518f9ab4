// The fused ops where a gradient is needed: tsfuse::pairwise, and tsfuse::reduce of a sum or mean
// (no dtype, no epilogue), run fused forward (nothing of the region is stored but its operands and
// result), and their backward computes each operand's gradient as one more fused op: the operand's
// gradient program (kernels/reference/backward.h) over the operands and the incoming gradient
// (viewed with the reduced dims kept, divided by their count for a mean), summed over the dims the
// operand was broadcast along. Where no program can be generated (a derivative reading a None
// argument) and for a double backward (create_graph), that operand's gradient is ATen's autograd
// through the op's reference evaluation, recomputed from the saved operands.
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace tsfuse {

at::Tensor pairwiseWithGradient(at::TensorList operands, c10::string_view expr);

// nullopt for a reduction this does not cover (the caller runs it unfused through ATen).
std::optional<at::Tensor> reduceWithGradient(at::TensorList operands, c10::string_view expr, c10::string_view reduction,
                                             at::OptionalIntArrayRef dim, bool keepdim,
                                             std::optional<c10::ScalarType> dtype,
                                             std::optional<c10::string_view> epilogue);

}  // namespace tsfuse
