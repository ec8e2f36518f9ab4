// The chunked ATen path: exact for every dtype, op and device, with intermediates bounded by a
// fixed element budget. The output is computed slab by slab along one of its (kept) dims; each
// operand is narrowed along that dim only where it is not broadcast, so 0-dim operands stay 0-dim
// and type promotion is unchanged.
#include "kernels/fused_call.h"

#include "tsfuse/log.h"

namespace tsfuse {
namespace {

constexpr int64_t kSlabElements = int64_t(1) << 18;

}  // namespace

at::Tensor runChunked(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an) {
  const at::IntArrayRef shape(an.shape);
  const int64_t R = static_cast<int64_t>(shape.size());
  auto oneSlab = [&] {  // small, 0-dim or nothing to slice along: the whole output at once
    setLastPath("chunked");
    at::Tensor v = evalAten(e, operands);
    return reduce ? applyReduction(*reduce, v) : v;
  };
  if (an.valueShape != an.shape || R == 0) return oneSlab();

  std::vector<int64_t> rdims;
  if (reduce) rdims = reducedDims(*reduce, R);
  auto isReduced = [&](int64_t d) { return std::find(rdims.begin(), rdims.end(), d) != rdims.end(); };

  // The slab dim: the outermost kept dim with more than one index.
  int64_t slabDim = -1;
  for (int64_t d = 0; d < R && slabDim < 0; ++d)
    if (!isReduced(d) && shape[d] > 1) slabDim = d;
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  if (slabDim < 0 || total <= kSlabElements) {
    if (total > kSlabElements)
      TSFUSE_LOG(kernel, info, "chunked path: no dim to slice, evaluating ", total, " elements at once");
    return oneSlab();
  }
  const int64_t perIndex = total / shape[slabDim];
  const int64_t step = std::max<int64_t>(1, kSlabElements / std::max<int64_t>(perIndex, 1));

  at::Tensor out = an.allocOut(mainDevice(operands));
  at::Tensor keep = out;
  if (reduce && !reduce->keepdim)
    for (int64_t d : rdims) keep = keep.unsqueeze(d);

  ReduceSpec slabSpec;
  if (reduce) {
    slabSpec = *reduce;
    slabSpec.keepdim = true;
  }
  std::vector<at::Tensor> slabOps(operands.size());
  for (int64_t s = 0; s < shape[slabDim]; s += step) {
    const int64_t len = std::min(step, shape[slabDim] - s);
    for (size_t i = 0; i < operands.size(); ++i) {
      const at::Tensor& t = operands[i];
      const int64_t d = slabDim - (R - t.dim());
      slabOps[i] = (d >= 0 && t.size(d) != 1) ? t.narrow(d, s, len) : t;
    }
    at::Tensor v = evalAten(e, slabOps);
    if (reduce) v = applyReduction(slabSpec, v);
    keep.narrow(slabDim, s, len).copy_(v);
  }
  setLastPath("chunked");
  return out;
}

}  // namespace tsfuse
