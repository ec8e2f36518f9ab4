#include "kernels/runtime/full_slice.h"

#include <c10/core/WrapDimMinimal.h>
#include <torch/csrc/jit/runtime/custom_operator.h>

namespace tsfuse {
namespace {

// aten::slice's checks on self, in its order (aten/src/ATen/native/TensorShape.cpp: slice), for
// the arguments a full slice has (start None, end None, step 1: nothing else can fail).
void fullSlice(torch::jit::Stack& stack) {
  const int64_t dim = torch::jit::pop(stack).toInt();
  const at::Tensor& self = torch::jit::peek(stack, 0, 1).toTensor();  // stays: it is the result
  TORCH_CHECK_INDEX(self.dim() > 0, "slice() cannot be applied to a 0-dim tensor.");
  c10::maybe_wrap_dim(dim, self.dim());
}

const torch::jit::RegisterOperators kRegister({torch::jit::Operator(std::string(kFullSliceOp) +
                                                                        "(Tensor(a) self, int dim) -> Tensor(a)",
                                                                    fullSlice, c10::AliasAnalysisKind::FROM_SCHEMA)});

}  // namespace
}  // namespace tsfuse
