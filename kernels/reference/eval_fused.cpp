#include "kernels/reference/eval_fused.h"

namespace tsfuse {

void checkFusedOperandCount(const Expr& e, const ReduceSpec* reduce, size_t n) {
  if (!reduce || !reduce->epilogue) return checkOperandCount(e, n);
  const int64_t ownInputs = reduce->withIndices() ? 2 : 1;  // ($0 value[, $1 indices]) come from the reduction
  const size_t want = e.numInputs + std::max<int64_t>(reduce->epilogue->numInputs - ownInputs, 0);
  TORCH_CHECK(n == want, "tsfuse: expression '", e.str(), "' with epilogue '", reduce->epilogue->str(), "' takes ",
              want, " operands, got ", n);
}

Outputs evalFused(const Expr& e, at::TensorList operands, const ReduceSpec* reduce) {
  checkFusedOperandCount(e, reduce, operands.size());
  at::Tensor v = evalAten(e, mainOperands(e, operands));
  if (!reduce) return {v};
  return reduceWithAten(e, operands, *reduce, std::move(v));
}

Outputs reduceWithAten(const Expr& e, at::TensorList operands, const ReduceSpec& reduce, at::Tensor value) {
  Outputs outs = applyReductionAll(reduce, value);
  value.reset();  // not held while the epilogue runs
  if (reduce.epilogue && reduce.withIndices()) {
    outs[1] = applyIndicesEpilogue(reduce, outs[0], outs[1], epilogueOperands(e, operands));
  } else if (reduce.epilogue) {
    outs[0] = applyEpilogue(reduce, outs[0], epilogueOperands(e, operands));
  }
  return outs;
}

}  // namespace tsfuse
