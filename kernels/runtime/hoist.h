// Costly elementwise work over fewer dims than the call's broadcast space, done once at its own
// shape before the fused call, as eager does it, rather than once per element of the space.
//
// An instruction the CPU computes outside its compiled code (a transcendental, an ATen op on the
// tile) whose operands vary along at most a quarter of the space's elements, and which saves at
// least 4096 evaluations, is evaluated with ATen over its operands, its value a new operand of the
// rest of the program. That value is eager's own intermediate, so the result keeps eager's bits;
// nothing larger than the largest operand is stored:
//   v1: div($0, $1); atan(%0); sub($2, %1)      $0, $1: [1, M]   $2: [N, M]
//   -> atan(div($0, $1)) over [1, M] with ATen, then  v1: sub($0, $1)  over ($2, that value)
// Integer work counts as costly (the compiled code has float and bool lanes only: an int64
// compare keeps a whole tile interpreted). And a costly instruction's argument computed from
// one-value operands (pow by -exp(alpha)) is computed once, whatever the call's size, so that
// the compiled code sees one value (its routine with a uniform exponent) instead of one per lane.
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

// Whether the CPU computes `ins` outside its compiled code, per value: an ATen op (or routine) on
// the tile, pow by an exponent other than the compiled ones, or a transcendental (MKL's routine or
// libm). Such an instruction is what hoisting moves.
bool costlyPerValue(const Instr& ins);

// nullopt where nothing is worth hoisting (or the operands do not broadcast: the call itself then
// raises eager's error). `operands`: the call's, the expression's first.
std::optional<Hoisted> hoistNarrowWork(const Expr& e, at::TensorList operands);

// Integer operands read only by compares (labels[:, None] == labels[None] over a whole [B, B]
// space, too wide to hoist), narrow, and whose values the program's floating dtype holds exactly
// (|x| <= 2^24 for float32), as that dtype: the compares give the same bools, and the kernels,
// which have no integer lanes, compile the program. The values are checked per call (O(operand)).
// nullopt where no operand qualifies.
std::optional<Hoisted> compareIntegersAsFloats(const Expr& e, at::TensorList operands);

}  // namespace tsfuse
