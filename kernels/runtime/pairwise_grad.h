// tsfuse::pairwise where a gradient is needed: the forward runs fused (nothing of the region is
// stored but its operands and result), and the backward computes each operand's gradient as one
// more fused op, the operand's gradient program (kernels/reference/backward.h) summed over the
// dims the operand was broadcast along. Where no program can be generated (a derivative reading a
// None argument) and for a double backward (create_graph), that operand's gradient is ATen's
// autograd through the region's reference evaluation, recomputed from the saved operands.
#pragma once

#include <ATen/ATen.h>

namespace tsfuse {

at::Tensor pairwiseWithGradient(at::TensorList operands, c10::string_view expr);

}  // namespace tsfuse
