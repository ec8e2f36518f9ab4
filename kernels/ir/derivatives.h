// The derivatives the registry states (kernels/ir/ops.def: TSFUSE_GRAD, TSFUSE_NOGRAD), parsed once:
// for each op, what flows back to each argument given the incoming gradient, in the expression
// language itself, so a backward pass is more expressions over the saved operands (issue: training
// through fused ops). tests/registry/op_derivatives_test.cpp checks every formula against ATen's
// autograd (tie rules included) and against finite differences, generated from this table.
#pragma once

#include "kernels/ir/expr.h"

#include <string>
#include <vector>

namespace tsfuse {

struct Derivative {
  enum class Kind : uint8_t {
    Incoming,  // "g": the incoming gradient itself
    None,      // "-": no gradient flows to this argument
    Formula,   // `formula`
  };
  Kind kind = Kind::None;
  // Over $0..$(k-1) the op's k arguments, $k its result, $(k+1) the incoming gradient; the value
  // is summed over the dims the argument was broadcast along and cast to its dtype. Alternatives
  // (" | " in the text) for forms where an optional argument is None, first match first.
  std::vector<Expr> formulas;

  // The first formula that reads no argument that is None among the op's `args`, or nullptr: no
  // gradient is generated for that form.
  const Expr* formulaFor(const std::vector<Arg>& args) const;
};

// One per argument of `op`; empty where the op passes no gradient (TSFUSE_NOGRAD).
const std::vector<Derivative>& derivatives(Op op);
// TSFUSE_NOGRAD's reason for `op`, or nullptr where it has derivatives.
const char* noGradientReason(Op op);
// Parses one derivative text of an op of `arity` arguments ("g", "-" or expression texts separated
// by " | "); throws c10::Error naming the problem.
Derivative parseDerivative(const std::string& text, int arity);

}  // namespace tsfuse
