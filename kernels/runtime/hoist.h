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
// raises eager's error). `operands`: the call's, the expression's first. With `wide`, a hoisted
// value may hold more elements than the largest operand (a slab's call: hoistSlabRows).
std::optional<Hoisted> hoistNarrowWork(const Expr& e, at::TensorList operands, bool wide = false);

// A map whose costly narrow values hold more than every operand (torchani's angular terms: cos and
// pow over [T, 4], exp over [T, 8], their product over [T, 8, 4]) computes each once per element
// only if they are stored: the call then runs in slabs of `rows` rows of its broadcast `space`'s
// dim 0 (a multiple of 64, so that eager's vector routines see their values in the same lanes),
// each hoisting with `wide`, so that a slab's values hold at most TSFUSE_HOIST_SLAB_BYTES (2 MiB),
// not the whole; each slab's output is written into the call's. nullopt where no such value is
// worth hoisting, one is not cut by rows, or an operand is not contiguous (the slabs are written
// into a contiguous output, eager's layout then).
struct SlabRows {
  std::vector<int64_t> space;
  int64_t rows = 0;
};
std::optional<SlabRows> hoistSlabRows(const Expr& e, at::TensorList operands);

// Integer operands read only by compares (labels[:, None] == labels[None] over a whole [B, B]
// space, too wide to hoist), narrow, and whose values the program's floating dtype holds exactly
// (|x| <= 2^24 for float32), as that dtype: the compares give the same bools, and the kernels,
// which have no integer lanes, compile the program. The values are checked per call (O(operand)).
// nullopt where no operand qualifies. `text`: e's text where the caller has it (else rebuilt).
std::optional<Hoisted> compareIntegersAsFloats(const Expr& e, at::TensorList operands, c10::string_view text = {});

}  // namespace tsfuse
