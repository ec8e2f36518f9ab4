#include "kernels/runtime/reduce_spec.h"

#include "kernels/reference/analysis.h"

#include <cstdlib>
#include <string>
#include <vector>

namespace tsfuse {

ReduceSpec makeReduceSpec(c10::string_view reduction, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<c10::ScalarType> dtype, std::optional<c10::string_view> epilogue) {
  ReduceSpec r;
  std::string text(reduction), name = text.substr(0, text.find(':'));
  TORCH_CHECK(reductionFromName(name, r.kind), "tsfuse::reduce: unknown reduction '", reduction,
              "' (sum, mean, prod, amax, amin, any, all, argmax, argmin, logsumexp, norm:<p>, var:<correction>, "
              "std:<correction>, max, min)");
  // norm's order and var/std's correction follow a colon; without one they take torch's defaults.
  const bool takesParam = r.kind == Reduction::Norm || r.variance();
  const bool extremum = r.kind == Reduction::Amax || r.kind == Reduction::Amin;
  if (extremum && name.size() < text.size()) {
    TORCH_CHECK(text.substr(name.size()) == ":index" && dim && dim->size() == 1, "tsfuse::reduce: '", reduction,
                "': amax/amin take only ':index' (max/min(dim)'s values), over one dim");
    r.routesGradient = true;
  } else if (takesParam && name.size() < text.size()) {
    const std::string p = text.substr(name.size() + 1);
    char* stop = nullptr;
    const double value = std::strtod(p.c_str(), &stop);
    TORCH_CHECK(!p.empty() && stop == p.c_str() + p.size(), "tsfuse::reduce: malformed ",
                r.kind == Reduction::Norm ? "norm order" : "correction", " in '", reduction, "'");
    (r.kind == Reduction::Norm ? r.p : r.correction) = value;
  } else {
    TORCH_CHECK(name.size() == text.size(),
                "tsfuse::reduce: only norm, var, std, amax and amin take a parameter, got '", reduction, "'");
  }
  // An out-of-range ScalarType (e.g. an int from TorchScript) would index ATen's dtype tables.
  TORCH_CHECK(!dtype || (static_cast<int>(*dtype) >= 0 && *dtype < c10::ScalarType::NumOptions),
              "tsfuse::reduce: dtype ", static_cast<int>(dtype ? *dtype : c10::ScalarType::Undefined),
              " is not a ScalarType");
  if (dim) r.dims = dim->vec();
  r.keepdim = keepdim;
  r.dtype = dtype;
  if (epilogue) r.epilogue = cachedExpr(std::string(*epilogue));
  return r;
}

ReduceSpec makeIndicesSpec(c10::string_view reduction, int64_t dim, bool keepdim,
                           std::optional<c10::string_view> epilogue) {
  ReduceSpec spec = makeReduceSpec(reduction, std::vector<int64_t>{dim}, keepdim, std::nullopt, epilogue);
  TORCH_CHECK(spec.withIndices(), "tsfuse::reduce_with_indices: reduction must be max or min, got '", reduction, "'");
  return spec;
}

}  // namespace tsfuse
