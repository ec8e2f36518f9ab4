// A fused elementwise program's gradient with respect to one operand, as another program: reverse-
// mode accumulation over the registry's derivatives (kernels/ir/derivatives.h). It recomputes the
// forward values it reads from the operands (nothing of the forward is saved but its operands and
// result), so a backward pass is one more fused op per operand: this program's value summed over
// the dims the operand was broadcast along (the tsfuse::reduce a fused op's autograd node runs).
//
//   forward  v1: sub($0, $1); exp(%0)                 ($0 [N,1], $1 [1,M])
//   d/d$0    v1: sub($0, $1); exp(%0); mul($2, %1); to(%2, float32)      ($2: the incoming gradient)
//
// Each contribution is cast to its target's dtype, as autograd's engine casts an edge's gradient,
// and a value read twice sums its contributions (in another order than the engine: gradients are
// within the summation-order tolerance of eager's, docs/exactness.md).
#pragma once

#include "kernels/ir/expr.h"

#include <ATen/ATen.h>

#include <optional>
#include <memory>
#include <string>

namespace tsfuse {

struct Gradient {
  enum class Status : uint8_t {
    Flows,       // `expr` is the gradient
    None,        // no gradient reaches the operand (only through masks, comparisons, numbers)
    Unsupported  // a derivative reads an argument that is None in this form, or the analysis raises on
                 // stand-ins where the operands do not: `why` says which
  };
  Status status = Status::None;
  // Over the forward's operands $0..$(n-1) and the incoming gradient $n.
  Expr expr;
  std::string why;
};

// Whether eager's autograd would make `forward`'s value require grad over `operands`: a path of
// floating (or complex) values from an operand that requires grad, through arguments autograd
// records (every one a derivative covers, a rounded quotient's, whose gradient is zero), not masks,
// dtypes or a shape-only reader's (full_like). The gradients may still all be zero.
bool recordsGradient(const std::shared_ptr<const Expr>& forward, at::TensorList operands);

// Per operand: whether eager's autograd would record an edge from `forward`'s value back to it
// (the reverse of recordsGradient's paths). An operand without one is read detached, so the
// fused op's node does not reach autograd nodes eager's graph never visits (their saved values
// may since have been written in place: eager's backward does not check them, nor may ours).
std::vector<bool> reachedByGradient(const std::shared_ptr<const Expr>& forward, at::TensorList operands);

// The gradient of `forward`'s value with respect to operand `wrt`, for a call on `operands` (their
// dtypes and those analysis gives each value decide the casts; their values are not read).
Gradient gradientOf(const Expr& forward, int wrt, at::TensorList operands);

// Appends `program` to `into` with its operand $i read as inputs[i] (an operand or a value of
// `into`, or a literal) and returns its value, `into`'s last instruction: how gradients through
// several fused stages become one program. Another instruction equal to one `into` already holds
// is not repeated, and one of numbers only is folded.
Arg appendProgram(Expr& into, const Expr& program, const std::vector<Arg>& inputs);

// The operands $first .. $(first + n - 1), as appendProgram's inputs.
std::vector<Arg> inputArgs(int64_t first, int64_t n);

}  // namespace tsfuse
