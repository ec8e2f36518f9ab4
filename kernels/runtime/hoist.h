// Costly elementwise work over fewer dims than the call's broadcast space, done once at its own
// shape before the fused call, as eager does it.
//
// A fused region takes in the per-operand work that feeds its pairwise part: complete IoU's
// `atan(w_gt / h_gt)` is computed on the M boxes in eager, but inside the region it is an
// instruction of the program, evaluated once per pair (100000 x 9 boxes: 1.8 M MKL atans instead
// of 100009, and the fused op no faster than eager). Such an instruction (an op the CPU computes
// outside its compiled code: a transcendental or an ATen op on the tile) whose operands vary along
// at most a quarter of the space's elements, and which saves at least 4096 evaluations (a tiny
// call keeps its program), is evaluated with ATen over the operands, its value becoming a new
// operand of the rest of the program. Its value is eager's own intermediate (the same op over the
// same tensors), so the result keeps eager's bits; nothing larger than the largest operand is
// stored.
//
//   v1: div($0, $1); atan(%0); sub($2, %1)      $0, $1: [1, M]   $2: [N, M]
//   -> atan(div($0, $1)) over [1, M] with ATen, then  v1: sub($0, $1)  over ($2, that value)
#pragma once

#include "kernels/ir/expr.h"

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

namespace tsfuse {

struct Hoisted {
  std::vector<at::Tensor> operands;  // the main operands still read, the hoisted values, the rest
  std::string expr;                  // the program over them
  std::vector<int64_t> position;     // per operand of the call: its index in `operands`, -1 if not read
};

// Whether the CPU computes `op` outside its compiled code, per value: an ATen op on the tile or a
// transcendental (MKL's routine or libm). Such an instruction is what hoisting moves.
bool costlyPerValue(Op op);

// nullopt where nothing is worth hoisting (or the operands do not broadcast: the call itself then
// raises eager's error). `operands`: the call's, the expression's first.
std::optional<Hoisted> hoistNarrowWork(const Expr& e, at::TensorList operands);

}  // namespace tsfuse
