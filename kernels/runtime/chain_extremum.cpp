// A chain's later stage as ATen's reduction (applyStage), with an exact fast path for argmin/argmax
// and max/min (with indices, or its values alone) along one dim.
#include "kernels/runtime/chain.h"

#include "kernels/backends/cpu/row_extremum.h"
#include "kernels/runtime/extrema.h"

#include <ATen/WrapDimUtils.h>

#include <optional>

namespace tsfuse {
namespace {

// argmin/argmax, max/min with indices and max/min's values alone (amin:index) over one dim of a
// non-empty extent, faster than ATen's kernels and with the same results (the first extremum, the
// first NaN):
//  * max/min's values alone: tsfuse::extremum_values (kernels/runtime/extrema.h);
//  * float32 rows contiguous along the dim (a stage-0 slab reduced over its last dim: nearest
//    neighbour): cpu::firstExtremumOfRows, two vector passes per row where ATen's min/max(dim)
//    compare one value at a time;
//  * otherwise tsfuse::extremum (extrema.h), argmin/argmax as its indices: both return the first
//    extremum's index. An argmin not for bool (argmin raises where min does not); nothing for an
//    empty dim (the error names the op).
std::optional<Outputs> extremaAlongOneDim(const ReduceSpec& r, const at::Tensor& v) {
  const bool arg = r.kind == Reduction::Argmin || r.kind == Reduction::Argmax;
  const bool withValues = r.kind == Reduction::Min || r.kind == Reduction::Max;
  const bool valuesOnly = r.routesGradient && (r.kind == Reduction::Amax || r.kind == Reduction::Amin);
  if (!(arg || withValues || valuesOnly) || !r.dims || r.dims->size() != 1 || v.dim() == 0) return std::nullopt;
  const int64_t d = at::maybe_wrap_dim((*r.dims)[0], v.dim());
  if (v.size(d) == 0) return std::nullopt;
  const bool isMax = r.kind == Reduction::Argmax || r.kind == Reduction::Max || r.kind == Reduction::Amax;
  if (valuesOnly) return Outputs{extremumValuesOp(v, d, r.keepdim, isMax)};
  if (v.scalar_type() == at::kFloat && d == v.dim() - 1 && v.is_contiguous() && v.device().is_cpu()) {
    const int64_t n = v.size(d), rows = v.numel() / n;
    at::Tensor idx = at::empty({rows}, v.options().dtype(at::kLong));
    if (cpu::firstExtremumOfRows(v.const_data_ptr<float>(), rows, n, isMax, idx.mutable_data_ptr<int64_t>())) {
      std::vector<int64_t> shape(v.sizes().begin(), v.sizes().end());
      if (r.keepdim)
        shape[d] = 1;
      else
        shape.erase(shape.begin() + d);
      Outputs out;
      if (withValues) out.push_back(v.reshape({rows, n}).gather(1, idx.unsqueeze(1)).view(shape));
      out.push_back(idx.view(shape));
      return out;
    }
  }
  const bool real = at::isFloatingType(v.scalar_type()) || at::isIntegralType(v.scalar_type(), /*includeBool=*/false);
  if (arg && !real) return std::nullopt;
  auto [values, indices] = extremumOp(v, d, r.keepdim, isMax);
  return arg ? Outputs{indices} : Outputs{values, indices};
}

}  // namespace

Outputs applyStage(const ReduceSpec& spec, bool squeeze, const at::Tensor& value, at::TensorList extras) {
  ReduceSpec plain = spec;
  plain.epilogue.reset();
  const at::Tensor v = squeeze ? value.squeeze() : value;
  Outputs out;
  if (auto extrema = extremaAlongOneDim(plain, v))
    out = std::move(*extrema);
  else
    out = applyReductionAll(plain, v);
  if (spec.epilogue) out[0] = applyEpilogue(spec, out[0], extras);
  return out;
}

}  // namespace tsfuse
