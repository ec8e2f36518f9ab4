// Per-call analysis of a fused op: run the expression on meta tensors shaped like the operands.
// This yields, exactly as eager computes them, every instruction's dtype and shape, the output's
// sizes and strides, and whether eager would raise (then the caller runs eager to raise the
// genuine error).
#pragma once

#include "kernels/aten_eval.h"

#include <memory>
#include <optional>

namespace tsfuse {

struct Analysis {
  std::vector<at::Tensor> values;            // meta value of each instruction
  at::Tensor out;                            // meta output of the op (after the reduction)
  std::vector<c10::ScalarType> computeType;  // dtype each instruction computes in
  std::vector<int64_t> shape;                // broadcast shape of all operands
};

// nullopt when eager would raise (or the meta run is not possible).
std::optional<Analysis> analyze(const Expr& e, at::TensorList operands, const ReduceSpec* reduce);

// Parsed expressions, cached by text (thread-safe, bounded).
std::shared_ptr<const Expr> cachedExpr(const std::string& text);

// Reduced dims of `shape` after wrapping, sorted, unique; all dims when r.dims is nullopt or
// (for amax/amin, like ATen) empty.
std::vector<int64_t> reducedDims(const ReduceSpec& r, int64_t rank);

}  // namespace tsfuse
