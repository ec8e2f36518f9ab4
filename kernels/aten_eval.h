// The reference semantics of a fused region: evaluate its expression with the ATen ops it names.
//
// Used (a) on meta tensors to infer dtypes, shapes, strides and every error eager would raise,
// (b) when autograd must record the computation, and (c) on slices of the operands by the
// chunked path. Everything the fast kernels do is defined as "what this function returns".
#pragma once

#include "tsfuse/expr.h"

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <vector>

namespace tsfuse {

struct ReduceSpec {
  Reduction kind = Reduction::Sum;
  std::optional<std::vector<int64_t>> dims;  // nullopt: all dims
  bool keepdim = false;
  std::optional<c10::ScalarType> dtype;      // sum/mean/prod/norm only
  double p = 2.0;                            // norm's order
  // Elementwise arithmetic applied to the reduced value: $0 is the reduced value, $k (k >= 1)
  // is epilogue operand k-1 (the fused op's operands after the expression's own).
  std::shared_ptr<const Expr> epilogue;

  bool withIndices() const { return kind == Reduction::Max || kind == Reduction::Min; }
};

// A literal as ATen sees a Python number: a 0-dim "wrapped number" tensor on `device`.
at::Tensor wrappedLiteral(const Arg& arg, c10::Device device);
c10::Scalar literalScalar(const Arg& arg);

// Throws c10::Error unless `n` is the number of operands `e` takes.
void checkOperandCount(const Expr& e, size_t n);

// Evaluates instruction `k` given its already evaluated arguments.
at::Tensor evalInstr(const Instr& ins, const std::vector<at::Tensor>& values, at::TensorList inputs);

// Value of every instruction (for analysis); keeps all of them alive.
std::vector<at::Tensor> evalAtenAll(const Expr& e, at::TensorList inputs);
// Value of the expression; frees each intermediate after its last use, as the interpreter would.
at::Tensor evalAten(const Expr& e, at::TensorList inputs);
at::Tensor applyReduction(const ReduceSpec& r, const at::Tensor& value);
// Every output of the reduction: (values, indices) for max/min, else the one result.
std::vector<at::Tensor> applyReductionAll(const ReduceSpec& r, const at::Tensor& value);
// The epilogue's value for the reduced value `reduced` (r.epilogue must be set).
at::Tensor applyEpilogue(const ReduceSpec& r, const at::Tensor& reduced, at::TensorList epilogueOperands);
// The reduction text of the op: "sum", "norm:2.0", ...
std::string reductionText(const ReduceSpec& r);

// "sum(dim=[1, 2], keepdim=True)" — for logs and the report.
std::string describe(const ReduceSpec& r);

}  // namespace tsfuse
