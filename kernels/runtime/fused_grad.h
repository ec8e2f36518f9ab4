// The fused ops where a gradient is needed: tsfuse::pairwise, and tsfuse::reduce of a sum or mean
// (no dtype, no epilogue), run fused forward (nothing of the region is stored but its operands and
// result), and their backward computes each operand's gradient as one more fused op: the operand's
// gradient program (kernels/reference/backward.h) over the operands and the incoming gradient
// (viewed with the reduced dims kept, divided by their count for a mean), summed over the dims the
// operand was broadcast along. Where no program can be generated (a derivative reading a None
// argument) and for a double backward (create_graph), that operand's gradient is ATen's autograd
// through the op's reference evaluation, recomputed from the saved operands.
#pragma once

#include "kernels/reference/aten_eval.h"
#include "kernels/reference/backward.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <functional>
#include <optional>

namespace tsfuse {

at::Tensor pairwiseWithGradient(at::TensorList operands, c10::string_view expr);

// nullopt for a reduction this does not cover (the caller runs it unfused through ATen).
std::optional<at::Tensor> reduceWithGradient(at::TensorList operands, c10::string_view expr, c10::string_view reduction,
                                             at::OptionalIntArrayRef dim, bool keepdim,
                                             std::optional<c10::ScalarType> dtype,
                                             std::optional<c10::string_view> epilogue);

// tsfuse::reduce_chain of a sum or mean, then a reduction with an adjoint or a softmax
// (kernels/runtime/chain_grad.cpp); nullopt for a chain this does not cover.
std::optional<at::Tensor> reduceChainWithGradient(at::TensorList operands, c10::string_view expr,
                                                  c10::ArrayRef<std::string> stages);

// tsfuse::reduce_sweep whose branches each form such a chain with stage 0, none with an epilogue
// (kernels/runtime/sweep_grad.cpp); nullopt for a sweep this does not cover.
std::optional<std::vector<at::Tensor>> reduceSweepWithGradient(at::TensorList operands, c10::string_view expr,
                                                               c10::ArrayRef<std::string> stages);

// The parts every kind's backward is made of.
namespace grad {

// The dims of `value`'s shape that `operand` was broadcast along (its missing leading dims and its
// size-1 dims where the value's size is not 1).
std::vector<int64_t> broadcastDims(at::IntArrayRef operand, at::IntArrayRef value);

// How a reduction hands its incoming gradient to the values u it folded: `program` over
// (u, operands...) is u's gradient (null: operands[0] is), each operand broadcastable to u's space.
//   sum: g (the incoming gradient, reduced dims kept)     mean: g / count
//   amax/amin: g / ties * (u == r), eager's even split     max/min(dim)'s values: g where the index
//   logsumexp: g * exp(u - r)                               softmax: y * (g - sum(g * y)), ...
struct Adjoint {
  std::shared_ptr<const Expr> program;
  std::vector<at::Tensor> operands;
};

// A reduction, over the reduced dims kept, of `tail` over (u, extra...) or of u itself where null:
// how the caller recomputes u, for the adjoints that count ties or find the index.
using Fold =
    std::function<at::Tensor(const Expr* tail, const std::vector<at::Tensor>& extra, const std::string& reduction)>;

// The Fold of a tsfuse::reduce of `e` over `operands` (value space `shape`) along `r`'s reduced
// dims: one more fused reduce of e then the tail. `e` must outlive it.
Fold foldOf(const Expr& e, const ReduceSpec& r, at::TensorList operands, at::IntArrayRef shape);

// Whether `r` has a fused adjoint (adjointOf): sum, mean, amax, amin, logsumexp, no dtype.
bool hasAdjoint(const ReduceSpec& r);
// Whether `r`'s adjoint reads its result (which the forward then saves): amax and amin splitting
// among ties, logsumexp (max/min(dim)'s values route to the index they recompute instead).
bool readsResult(const ReduceSpec& r);

// `r`'s adjoint over a space `shape`, for autograd's `grad` and the reduction's `result` (no
// epilogue); nullopt for a reduction with no fused adjoint (the caller runs ATen's autograd).
std::optional<Adjoint> adjointOf(const ReduceSpec& r, at::IntArrayRef shape, const at::Tensor& grad,
                                 const at::Tensor& result, const Fold& fold);
// softmax / log_softmax's adjoint for their output y.
Adjoint normalizeAdjoint(bool log, int64_t dim, const at::Tensor& grad, const at::Tensor& y);

// `e` then `tail` over (e's value, operands e.numInputs...): one program over e's operands and
// `extra` more; `e` itself where tail is null.
Expr compose(const Expr& e, const Expr* tail, int64_t extra);

// The program whose value, summed over the dims operand `wrt` was broadcast along, is its gradient:
// e's gradient program for `wrt` (kernels/reference/backward.h) after `adjoint`'s, over e's operands
// then the adjoint's. Its status None or Unsupported as gradientOf's.
Gradient gradientProgram(const Expr& e, int wrt, at::TensorList operands, const Adjoint& adjoint);

// The gradient of operand `wrt` of the elementwise program `e` over `operands` (of value `shape`)
// whose value's gradient is `adjoint`'s: one fused op, the operand's gradient program summed over
// the dims it was broadcast along. nullopt where no program can be generated; an undefined tensor
// where no gradient reaches the operand.
std::optional<at::Tensor> fusedGradient(const Expr& e, int wrt, at::TensorList operands, at::IntArrayRef shape,
                                        const Adjoint& adjoint);

// The gradient of `target`: `p`'s value over `ops` (in a space `shape`) summed over `dims` of that
// space (SumOver), by one fused op.
at::Tensor summedGradient(const Expr& p, at::TensorList ops, at::IntArrayRef shape, std::vector<int64_t> dims,
                          const at::Tensor& target);

// The shape of `p`'s value over `ops`: the operands its value reads, broadcast. A fused op spans
// that shape, which is narrower than the space where the value reads fewer operands.
std::vector<int64_t> spanOf(const Expr& p, at::TensorList ops);

// An operand's gradient, a program's value summed over `dims` of a space `shape`, by a fused op
// over the program's span (spanOf): a summed dim the span lacks holds one value, whose sum is
// that value times the dim's size, and a dim the operand keeps but the span lacks is broadcast.
class SumOver {
 public:
  SumOver(at::IntArrayRef span, at::IntArrayRef shape, std::vector<int64_t> dims);
  // The summed dims the span has, in its own numbering: the fused op's reduced dims (kept).
  std::vector<int64_t> spanned;
  // The fused op's result `r` as the gradient of `target`.
  at::Tensor shapedAs(at::Tensor r, const at::Tensor& target) const;

 private:
  std::vector<int64_t> shape_, dims_;
  int64_t count_ = 1;
};

// For a fused op's autograd forward: undefined incoming gradients stay undefined, and the operand
// count is kept, so that a backward reached by none (its output read through a comparison alone)
// returns before unpacking what it saved, which a later in-place write may have changed: eager
// never runs that backward, and unpacking would raise.
void passUndefinedGradients(torch::autograd::AutogradContext* ctx, size_t operands);
// The backward's result when no incoming gradient is defined: none for each of the operands and
// the `arguments` after them; nullopt otherwise.
std::optional<torch::autograd::variable_list> noGradients(torch::autograd::AutogradContext* ctx,
                                                          const torch::autograd::variable_list& grads,
                                                          size_t arguments);

// The gradient of operand `i` through ATen's autograd of `reference` (the op's unfused evaluation)
// recomputed from `saved`, for `incoming`; differentiable itself in a double backward.
at::Tensor atenGradient(const std::function<at::Tensor(at::TensorList)>& reference, at::TensorList saved, size_t i,
                        const at::Tensor& incoming);

}  // namespace grad

}  // namespace tsfuse
