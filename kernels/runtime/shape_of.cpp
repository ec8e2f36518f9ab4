#include "kernels/runtime/shape_of.h"

#include "kernels/reference/operand_device.h"
#include "kernels/reference/analysis.h"
#include "kernels/runtime/bind_numbers.h"
#include "kernels/runtime/eager.h"
#include "kernels/runtime/fused_call.h"

namespace tsfuse {

at::Tensor shapeOf(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce) {
  std::shared_ptr<const Expr> e = checkedExpr(operands, exprText, reduce);
  if (auto bound = bindNumbers(e, reduce, operands))  // (the epilogue's numbers bound too)
    return shapeOf(bound->operands, bound->text, bound->reduce ? &*bound->reduce : reduce);
  auto device = commonDevice(operands);
  std::optional<Analysis> an;
  if (device) an = analyzeCached(e, operands, reduce);
  if (!an) return runEager(*e, operands, reduce);  // raises eager's error (or computes)
  return at::empty({}, at::TensorOptions().dtype(an->outDtype).device(*device)).expand(an->outSizes);
}

}  // namespace tsfuse
