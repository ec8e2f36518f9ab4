// The chunked ATen path: exact for every dtype, op and device, with intermediates bounded by a
// fixed element budget. The output is computed slab by slab along one of its (kept) dims; each
// operand is narrowed along that dim only where it is not broadcast, so 0-dim operands stay 0-dim
// and type promotion is unchanged.
#include "kernels/backends/chunked/chunked.h"

#include "kernels/backends/last_path.h"
#include "kernels/reference/operand_device.h"
#include "kernels/backends/path_counts.h"
#include "kernels/backends/slabs.h"

#include "tsfuse/log.h"

namespace tsfuse {

Outputs runChunked(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an,
                   const IterationPlan& plan) {
  countPath(PathCount::ChunkedCalls);
  const at::IntArrayRef shape(plan.shape);
  const int64_t R = static_cast<int64_t>(shape.size());
  auto oneSlab = [&] {  // small, 0-dim or nothing to slice along: the whole output at once
    setLastPath("chunked");
    return evalFused(e, operands, reduce);
  };
  if (an.valueShape != an.shape || R == 0) return oneSlab();
  const bool epilogue = reduce && reduce->epilogue;
  if (epilogue && !an.epilogueKeepsShape) return oneSlab();

  const DimVector& rdims = plan.reducedDims;
  const int64_t slabDim = plan.slabDim(), total = plan.numel();
  const c10::Device device = mainDevice(operands);
  const int64_t budget = slabElements(device);
  if (slabDim < 0 || total <= budget) {
    if (total > budget)
      TSFUSE_LOG(kernel, info, "chunked path: no dim to slice, evaluating ", total, " elements at once");
    return oneSlab();
  }
  const int64_t perIndex = total / shape[slabDim];
  const int64_t step = std::max<int64_t>(1, budget / std::max<int64_t>(perIndex, 1));

  Outputs outs{an.allocOut(device)};
  if (reduce && reduce->withIndices()) outs.push_back(an.allocIndices(device));
  std::vector<at::Tensor> keeps = outs;  // the outputs with the reduced dims present as size 1
  if (reduce && !reduce->keepdim)
    for (auto& k : keeps)
      for (int64_t d : rdims) k = k.unsqueeze(d);
  // The slab dim in the output's own dims (the epilogue works there).
  int64_t outSlabDim = slabDim;
  if (reduce && !reduce->keepdim)
    for (int64_t d : rdims) outSlabDim -= d < slabDim;

  ReduceSpec slabSpec;
  if (reduce) {
    slabSpec = *reduce;
    slabSpec.keepdim = true;
    slabSpec.epilogue.reset();
  }
  const at::TensorList mainOps = mainOperands(e, operands);
  for (int64_t s = 0; s < shape[slabDim]; s += step) {
    const int64_t len = std::min(step, shape[slabDim] - s);
    at::Tensor v = evalAten(e, narrowOperands(mainOps, R, slabDim, s, len));
    if (!reduce) {
      keeps[0].narrow(slabDim, s, len).copy_(v);
      continue;
    }
    Outputs rs = applyReductionAll(slabSpec, v);
    if (epilogue) {
      at::Tensor r = reduce->keepdim ? rs[0] : rs[0].squeeze(rdims);
      const int64_t outRank = static_cast<int64_t>(an.outSizes.size());
      at::Tensor y =
          applyEpilogue(*reduce, r, narrowOperands(epilogueOperands(e, operands), outRank, outSlabDim, s, len));
      outs[0].narrow(outSlabDim, s, len).copy_(y);
      continue;
    }
    for (size_t i = 0; i < rs.size(); ++i) keeps[i].narrow(slabDim, s, len).copy_(rs[i]);
  }
  setLastPath("chunked");
  return outs;
}

}  // namespace tsfuse
