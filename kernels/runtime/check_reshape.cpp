#include "kernels/runtime/check_reshape.h"

#include <ATen/InferSize.h>
#include <torch/csrc/jit/runtime/custom_operator.h>

namespace tsfuse {
namespace {

// reshape's own size check (aten/src/ATen/native/TensorShape.cpp: reshape infers the shape with
// infer_size_dv before it views or copies): the same messages.
void checkReshape(torch::jit::Stack& stack) {
  const std::vector<int64_t> shape = torch::jit::pop(stack).toIntVector();
  const at::Tensor& self = torch::jit::peek(stack, 0, 1).toTensor();  // stays: it is the result
  at::infer_size_dv(shape, self.numel());
}

const torch::jit::RegisterOperators kRegister(
    {torch::jit::Operator(std::string(kCheckReshapeOp) + "(Tensor(a) self, int[] shape) -> Tensor(a)", checkReshape,
                          c10::AliasAnalysisKind::FROM_SCHEMA)});

}  // namespace
}  // namespace tsfuse
