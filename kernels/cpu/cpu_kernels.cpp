// CPU kernels of the fused ops: the native tile evaluator, falling back to the chunked path.
#include "kernels/cpu/native.h"
#include "kernels/fused_call.h"

#include <torch/library.h>

namespace tsfuse::cpu {
namespace {

at::Tensor pairwiseCpu(at::TensorList ops, c10::string_view expr) {
  return runFused(ops, expr, nullptr, runNative);
}

at::Tensor reduceCpu(at::TensorList ops, c10::string_view expr, c10::string_view reduction,
                     at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                     std::optional<c10::string_view> epilogue) {
  ReduceSpec spec = makeReduceSpec(reduction, dim, keepdim, dtype, epilogue);
  return runFused(ops, expr, &spec, runNative);
}

std::tuple<at::Tensor, at::Tensor> indicesCpu(at::TensorList ops, c10::string_view expr,
                                              c10::string_view reduction, int64_t dim, bool keepdim) {
  ReduceSpec spec = makeIndicesSpec(reduction, dim, keepdim);
  Outputs o = runFusedAll(ops, expr, &spec, runNative);
  return {o[0], o[1]};
}

}  // namespace
}  // namespace tsfuse::cpu

TORCH_LIBRARY_IMPL(tsfuse, CPU, m) {
  m.impl("pairwise", tsfuse::cpu::pairwiseCpu);
  m.impl("reduce", tsfuse::cpu::reduceCpu);
  m.impl("reduce_with_indices", tsfuse::cpu::indicesCpu);
}
