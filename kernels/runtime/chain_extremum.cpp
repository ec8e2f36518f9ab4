// A chain's later stage as ATen's reduction (applyStage), with an exact fast path for argmin/argmax
// and max/min with indices along one dim.
#include "kernels/runtime/chain.h"

#include "kernels/backends/cpu/row_extremum.h"
#include "kernels/runtime/extrema.h"

#include <ATen/WrapDimUtils.h>

#include <optional>

namespace tsfuse {
namespace {

// argmin/argmax, and max/min with indices, over one dim of a non-empty extent, faster than ATen's
// kernels and with the same results (the first extremum, the first NaN):
//  * float32 rows contiguous along the dim (a stage-0 slab reduced over its last dim: nearest
//    neighbour): cpu::firstExtremumOfRows, two vector passes per row where ATen's min/max(dim)
//    compare one value at a time;
//  * otherwise argmin/argmax as the indices of min/max(dim): ATen's argmin kernel is not
//    vectorized and min(dim)'s is, and both return the first extremum's index. Not for bool
//    (argmin raises where min does not) nor an empty dim (the error names the op); max/min with
//    indices then keep ATen's own call.
std::optional<Outputs> extremaAlongOneDim(const ReduceSpec& r, const at::Tensor& v) {
  const bool arg = r.kind == Reduction::Argmin || r.kind == Reduction::Argmax;
  const bool withValues = r.kind == Reduction::Min || r.kind == Reduction::Max;
  if (!(arg || withValues) || !r.dims || r.dims->size() != 1 || v.dim() == 0) return std::nullopt;
  const int64_t d = at::maybe_wrap_dim((*r.dims)[0], v.dim());
  if (v.size(d) == 0) return std::nullopt;
  const bool isMax = r.kind == Reduction::Argmax || r.kind == Reduction::Max;
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
  if (!arg || !real) return std::nullopt;
  return Outputs{std::get<1>(isMax ? at::max(v, d, r.keepdim) : at::min(v, d, r.keepdim))};
}

}  // namespace

Outputs applyStage(const ReduceSpec& spec, bool squeeze, const at::Tensor& value, at::TensorList extras) {
  ReduceSpec plain = spec;
  plain.epilogue.reset();
  const at::Tensor v = squeeze ? value.squeeze() : value;
  Outputs out;
  if (auto extrema = extremaAlongOneDim(plain, v))
    out = std::move(*extrema);
  else if (plain.routesGradient && (plain.kind == Reduction::Amax || plain.kind == Reduction::Amin) && plain.dims &&
           plain.dims->size() == 1)
    out = {extremumValuesOp(v, (*plain.dims)[0], plain.keepdim, plain.kind == Reduction::Amax)};
  else
    out = applyReductionAll(plain, v);
  if (spec.epilogue) out[0] = applyEpilogue(spec, out[0], extras);
  return out;
}

}  // namespace tsfuse
