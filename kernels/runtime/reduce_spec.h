// The ReduceSpec of a fused reduction op from its arguments (tsfuse::reduce, tsfuse::reduce_with_indices).
#pragma once

#include "kernels/reference/aten_eval.h"

#include <optional>

namespace tsfuse {

// `reduction` is the op's text ("sum", "norm:2.0", ...); `epilogue` an expression text or none.
ReduceSpec makeReduceSpec(c10::string_view reduction, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<c10::ScalarType> dtype,
                          std::optional<c10::string_view> epilogue = std::nullopt);

// tsfuse::reduce_with_indices: max/min over one dim, with an epilogue over (values, indices) or none.
ReduceSpec makeIndicesSpec(c10::string_view reduction, int64_t dim, bool keepdim,
                           std::optional<c10::string_view> epilogue = std::nullopt);

}  // namespace tsfuse
