// max/min along one dim where no fused op took the reduction (kernels/runtime/extrema.h).
#include "kernels/runtime/extrema.h"

#include "kernels/reference/aten_eval.h"
#include "tsfuse/ops.h"

#include <ATen/WrapDimUtils.h>

#include <vector>

namespace tsfuse {

namespace {

// Below this many elements ATen's loop costs less than a fused call's set-up.
constexpr int64_t kMinFusedElements = int64_t(1) << 15;

// contiguous(x) is x's values with x's gradient: the fused reductions of x itself.
constexpr const char* kItself = "v1: contiguous($0, 0)";

bool fusedKernels(const at::Tensor& x) {
  const bool floating = x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble;
  return x.device().is_cpu() && floating && x.dim() > 0 && x.numel() >= kMinFusedElements;
}

// A contiguous x of rank > 2 as [before, extent, after] (or [before, extent]): the reduction's kept
// dims then form one space the compiled kernels walk as lanes, where the kept dims of a [P, G, 4]
// max over its last dim were a [P, G] space strided along G (interpreted: 5x slower). back() views
// a result of the flat reduction as the reduction of x gives it.
struct Flat {
  at::Tensor x;
  int64_t dim;
  bool keepdim;
  std::vector<int64_t> shape;  // empty: x itself
  at::Tensor back(const at::Tensor& r) const { return shape.empty() ? r : r.view(shape); }
};

Flat flattened(const at::Tensor& x, int64_t dim, bool keepdim) {
  if (x.dim() <= 2 || !x.is_contiguous()) return {x, dim, keepdim, {}};
  const int64_t d = at::maybe_wrap_dim(dim, x.dim()), n = x.size(d);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  if (keepdim)
    shape[d] = 1;
  else
    shape.erase(shape.begin() + d);
  int64_t before = 1, after = 1;
  for (int64_t k = 0; k < x.dim(); ++k)
    if (k != d) (k < d ? before : after) *= x.size(k);
  return {after == 1 ? x.view({before, n}) : x.view({before, n, after}), 1, false, std::move(shape)};
}

}  // namespace

at::Tensor extremumValuesOp(const at::Tensor& x, int64_t dim, bool keepdim, bool max) {
  if (!fusedKernels(x)) return extremumValues(x, dim, keepdim, max);
  // amax:index/amin:index: max/min(dim)'s values, the gradient routed to its index.
  const Flat f = flattened(x, dim, keepdim);
  return f.back(reduce({f.x}, kItself, max ? "amax:index" : "amin:index", std::vector<int64_t>{f.dim}, f.keepdim));
}

std::tuple<at::Tensor, at::Tensor> extremumOp(const at::Tensor& x, int64_t dim, bool keepdim, bool max) {
  if (!fusedKernels(x)) return max ? at::max(x, dim, keepdim) : at::min(x, dim, keepdim);
  const Flat f = flattened(x, dim, keepdim);
  auto [values, indices] = reduceWithIndices({f.x}, kItself, max ? "max" : "min", f.dim, f.keepdim);
  return {f.back(values), f.back(indices)};
}

at::Tensor argExtremumOp(const at::Tensor& x, int64_t dim, bool keepdim, bool max) {
  // argmax/argmin's index is max/min(dim)'s: the first extremum, or the first NaN.
  if (!fusedKernels(x)) return max ? at::argmax(x, dim, keepdim) : at::argmin(x, dim, keepdim);
  const Flat f = flattened(x, dim, keepdim);
  return f.back(std::get<1>(reduceWithIndices({f.x}, kItself, max ? "max" : "min", f.dim, f.keepdim)));
}

}  // namespace tsfuse
