// The reference semantics of a fused region: evaluate its expression with the ATen ops it names.
//
// Used (a) on meta tensors to infer dtypes, shapes, strides and every error eager would raise,
// (b) when autograd must record the computation, and (c) on slices of the operands by the
// chunked path. Everything the fast kernels do is defined as "what this function returns".
#pragma once

#include "tsfuse/expr.h"

#include <ATen/ATen.h>

#include <optional>
#include <vector>

namespace tsfuse {

struct ReduceSpec {
  Reduction kind = Reduction::Sum;
  std::optional<std::vector<int64_t>> dims;  // nullopt: all dims
  bool keepdim = false;
  std::optional<c10::ScalarType> dtype;      // sum/mean/prod only
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

// "sum(dim=[1, 2], keepdim=True)" — for logs and the report.
std::string describe(const ReduceSpec& r);

}  // namespace tsfuse
