#include "kernels/runtime/fused_grad.h"

#include "kernels/reference/analysis.h"
#include "kernels/reference/backward.h"
#include "kernels/runtime/reduce_spec.h"
#include "tsfuse/log.h"
#include "tsfuse/ops.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <ATen/ExpandUtils.h>

namespace tsfuse {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Each needed operand's gradient (`arguments`: the op's non-tensor arguments, which get none),
// given the saved operands, their value's `shape` and the value's gradient `adjoint` (nullopt:
// none fused); `reference` recomputes the op's output with ATen for the unfused path, autograd's
// `incoming` gradient.
variable_list operandGradients(AutogradContext* ctx, int64_t arguments, at::TensorList saved,
                               const std::vector<int64_t>& shape, const Expr& e,
                               const std::optional<grad::Adjoint>& adjoint,
                               const std::function<at::Tensor(at::TensorList)>& reference, const at::Tensor& incoming) {
  variable_list out(arguments + saved.size());
  if (!incoming.defined()) return out;
  for (size_t i = 0; i < saved.size(); ++i) {
    if (!ctx->needs_input_grad(i)) continue;
    std::optional<at::Tensor> g;
    if (adjoint && !at::GradMode::is_enabled()) g = grad::fusedGradient(e, static_cast<int>(i), saved, shape, *adjoint);
    out[i] = g ? *g : grad::atenGradient(reference, saved, i, incoming);
  }
  return out;
}

// Whether `e`'s value over `operands` requires grad as eager's would (recordsGradient); where it
// does not (a mask, a count, zeros_like), the op runs without an autograd node.
bool outputRequiresGrad(const std::shared_ptr<const Expr>& e, at::TensorList operands) {
  if (static_cast<int64_t>(operands.size()) != e->numInputs) return true;  // (the op raises eager's error)
  for (const at::Tensor& t : operands)
    if (!t.defined()) return true;
  try {
    return tsfuse::recordsGradient(e, operands);
  } catch (const c10::Error&) {
    return true;  // (operands that do not broadcast: the op raises eager's error)
  }
}

struct PairwiseFunction : torch::autograd::Function<PairwiseFunction> {
  static at::Tensor forward(AutogradContext* ctx, at::TensorList operands, const std::string& expr) {
    ctx->saved_data["expr"] = expr;
    grad::passUndefinedGradients(ctx, operands.size());
    ctx->save_for_backward(operands.vec());
    return pairwise(operands, expr);  // below autograd: grad mode is off in a custom forward
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (auto none = grad::noGradients(ctx, grads, 1)) return *none;
    const auto e = cachedExpr(ctx->saved_data["expr"].toStringRef());
    const variable_list saved = ctx->get_saved_variables();
    auto reference = [&](at::TensorList ops) { return evalAten(*e, ops); };
    return operandGradients(ctx, 1, saved, grad::spanOf(*e, saved), *e, grad::Adjoint{nullptr, {grads[0]}}, reference,
                            grads[0]);
  }
};

struct ReduceFunction : torch::autograd::Function<ReduceFunction> {
  static at::Tensor forward(AutogradContext* ctx, at::TensorList operands, const std::string& expr,
                            const std::string& reduction, std::optional<std::vector<int64_t>> dim, bool keepdim) {
    ctx->saved_data["expr"] = expr;
    ctx->saved_data["reduction"] = reduction;
    ctx->saved_data["dim"] = dim ? c10::IValue(*dim) : c10::IValue();
    ctx->saved_data["keepdim"] = keepdim;
    grad::passUndefinedGradients(ctx, operands.size());
    at::Tensor out = tsfuse::reduce(operands, expr, reduction, dim, keepdim, std::nullopt);
    std::vector<at::Tensor> saved = operands.vec();
    if (grad::readsResult(
            makeReduceSpec(reduction, dim ? at::OptionalIntArrayRef(*dim) : std::nullopt, keepdim, std::nullopt)))
      saved.push_back(out);
    ctx->save_for_backward(saved);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (auto none = grad::noGradients(ctx, grads, 4)) return *none;
    const auto e = cachedExpr(ctx->saved_data["expr"].toStringRef());
    const c10::IValue dimArg = ctx->saved_data["dim"];
    std::optional<std::vector<int64_t>> dim;
    if (!dimArg.isNone()) dim = dimArg.toIntVector();
    const ReduceSpec spec =
        makeReduceSpec(ctx->saved_data["reduction"].toStringRef(), dim ? at::OptionalIntArrayRef(*dim) : std::nullopt,
                       ctx->saved_data["keepdim"].toBool(), std::nullopt);
    variable_list saved = ctx->get_saved_variables();
    at::Tensor result;
    if (grad::readsResult(spec)) {
      result = saved.back();
      saved.pop_back();
    }
    const std::vector<int64_t> shape = grad::spanOf(*e, saved);
    std::optional<grad::Adjoint> adjoint;
    if (grads[0].defined() && !at::GradMode::is_enabled())
      adjoint = grad::adjointOf(spec, shape, grads[0], result, grad::foldOf(*e, spec, saved, shape));
    auto reference = [&](at::TensorList ops) { return applyReduction(spec, evalAten(*e, ops)); };
    return operandGradients(ctx, 4, saved, shape, *e, adjoint, reference, grads[0]);
  }
};

std::shared_ptr<const Expr> program(const char* text) { return cachedExpr(text); }

}  // namespace

namespace grad {

std::vector<int64_t> spanOf(const Expr& p, at::TensorList ops) {
  const at::DimVector value = instructionShapes(p, ops).back();
  return std::vector<int64_t>(value.begin(), value.end());
}

bool hasAdjoint(const ReduceSpec& r) {
  return !r.dtype && (r.kind == Reduction::Sum || r.kind == Reduction::Mean || r.kind == Reduction::Amax ||
                      r.kind == Reduction::Amin || r.kind == Reduction::Logsumexp);
}

bool readsResult(const ReduceSpec& r) {
  return ((r.kind == Reduction::Amax || r.kind == Reduction::Amin) && !r.routesGradient) ||
         r.kind == Reduction::Logsumexp;
}

std::vector<int64_t> broadcastDims(at::IntArrayRef operand, at::IntArrayRef value) {
  std::vector<int64_t> dims;
  const int64_t lead = static_cast<int64_t>(value.size() - operand.size());
  for (int64_t d = 0; d < static_cast<int64_t>(value.size()); ++d)
    if (d < lead || (operand[d - lead] == 1 && value[d] != 1)) dims.push_back(d);
  return dims;
}

std::optional<Adjoint> adjointOf(const ReduceSpec& r, at::IntArrayRef shape, const at::Tensor& grad,
                                 const at::Tensor& result, const Fold& fold) {
  if (r.dtype || r.epilogue) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(shape.size());
  const std::vector<int64_t> dims = reducedDims(r, rank);
  auto kept = [&](at::Tensor t) {
    if (!r.keepdim)
      for (int64_t d : dims) t = t.unsqueeze(d);
    return t;
  };
  const at::Tensor g = kept(grad);
  switch (r.kind) {
    case Reduction::Sum:
      return Adjoint{nullptr, {g}};
    case Reduction::Mean: {
      int64_t count = 1;
      for (int64_t d : dims) count *= shape[d];
      return Adjoint{nullptr, {g / count}};
    }
    case Reduction::Logsumexp:  // ATen's logsumexp_backward
      return Adjoint{program("v1: sub($0, $2); exp(%0); mul($1, %1)"), {g, kept(result)}};
    case Reduction::Amax:
    case Reduction::Amin: {
      if (r.routesGradient) {  // max/min(dim)'s values: the whole gradient to the index they return
        if (dims.empty()) return Adjoint{nullptr, {g}};  // (of a 0-dim value: the value itself)
        const int64_t d = dims.at(0);
        std::vector<int64_t> along(rank, 1);
        along[d] = shape[d];
        const at::Tensor iota = at::arange(shape[d], grad.options().dtype(at::kLong)).view(along);
        const at::Tensor index = fold(nullptr, {}, r.kind == Reduction::Amax ? "argmax" : "argmin");
        return Adjoint{program("v1: eq($2, $3); where(%0, $1, 0)"), {g, index, iota}};
      }
      // ATen's scale_grad_by_count: (g / the count of u equal to r) * (u == r)
      const at::Tensor res = kept(result);
      const at::Tensor ties = fold(program("v1: eq($0, $1)").get(), {res}, "sum");
      return Adjoint{program("v1: div($1, $2); eq($0, $3); mul(%0, %1)"), {g, ties, res}};
    }
    default:
      return std::nullopt;
  }
}

Adjoint normalizeAdjoint(bool log, int64_t dim, const at::Tensor& grad, const at::Tensor& y) {
  if (log)  // ATen's log_softmax backward: g - exp(y) * sum(g)
    return Adjoint{program("v1: exp($3); mul(%0, $2); sub($1, %1)"), {grad, grad.sum(dim, true), y}};
  // softmax's: y * (g - sum(g * y))
  return Adjoint{program("v1: sub($1, $2); mul($3, %0)"), {grad, (grad * y).sum(dim, true), y}};
}

Fold foldOf(const Expr& e, const ReduceSpec& r, at::TensorList operands, at::IntArrayRef shape) {
  return [&e, dims = reducedDims(r, static_cast<int64_t>(shape.size())), operands = operands.vec()](
             const Expr* tail, const std::vector<at::Tensor>& extra, const std::string& reduction) {
    std::vector<at::Tensor> ops = operands;
    ops.insert(ops.end(), extra.begin(), extra.end());
    return tsfuse::reduce(ops, compose(e, tail, static_cast<int64_t>(extra.size())).str(), reduction, dims,
                          /*keepdim=*/true, std::nullopt);
  };
}

Expr compose(const Expr& e, const Expr* tail, int64_t extra) {
  Expr out;
  out.numInputs = static_cast<int>(e.numInputs + extra);
  const Arg u = appendProgram(out, e, inputArgs(0, e.numInputs));
  if (tail) {
    std::vector<Arg> args{u};
    for (const Arg& a : inputArgs(e.numInputs, extra)) args.push_back(a);
    appendProgram(out, *tail, args);
  }
  out.validate();
  return out;
}

Gradient gradientProgram(const Expr& e, int wrt, at::TensorList operands, const Adjoint& adjoint) {
  Gradient g = gradientOf(e, wrt, operands);
  if (g.status != Gradient::Status::Flows) return g;
  const int64_t n = e.numInputs, k = static_cast<int64_t>(adjoint.operands.size());
  Expr p;
  p.numInputs = static_cast<int>(n + k);
  std::vector<Arg> args = inputArgs(0, n);
  Arg gu = Arg::input(n);
  if (adjoint.program) {
    std::vector<Arg> in{appendProgram(p, e, args)};
    for (const Arg& a : inputArgs(n, k)) in.push_back(a);
    gu = appendProgram(p, *adjoint.program, in);
  }
  args.push_back(gu);
  appendProgram(p, g.expr, args);
  p.validate();
  g.expr = std::move(p);
  return g;
}

std::optional<at::Tensor> fusedGradient(const Expr& e, int wrt, at::TensorList operands, at::IntArrayRef shape,
                                        const Adjoint& adjoint) {
  const Gradient g = gradientProgram(e, wrt, operands, adjoint);
  if (g.status == Gradient::Status::None) return at::Tensor();
  if (g.status == Gradient::Status::Unsupported) {
    TSFUSE_LOG(kernel, info, "gradient of operand ", wrt, " of '", e.str(), "' through ATen: ", g.why);
    return std::nullopt;
  }
  std::vector<at::Tensor> ops = operands.vec();
  ops.insert(ops.end(), adjoint.operands.begin(), adjoint.operands.end());
  const at::Tensor& target = operands[wrt];
  return summedGradient(g.expr, ops, shape, broadcastDims(target.sizes(), shape), target);
}

at::Tensor summedGradient(const Expr& p, at::TensorList ops, at::IntArrayRef shape, std::vector<int64_t> dims,
                          const at::Tensor& target) {
  const SumOver sum(spanOf(p, ops), shape, std::move(dims));
  const at::Tensor r = sum.spanned.empty()
                           ? pairwise(ops, p.str())
                           : tsfuse::reduce(ops, p.str(), "sum", sum.spanned, /*keepdim=*/true, std::nullopt);
  return sum.shapedAs(r, target);
}

SumOver::SumOver(at::IntArrayRef span, at::IntArrayRef shape, std::vector<int64_t> dims)
    : shape_(shape.vec()), dims_(std::move(dims)) {
  const int64_t lead = static_cast<int64_t>(shape.size() - span.size());
  for (int64_t d : dims_) {
    if (d >= lead && span[d - lead] == shape[d])
      spanned.push_back(d - lead);
    else
      count_ *= shape[d];
  }
}

at::Tensor SumOver::shapedAs(at::Tensor r, const at::Tensor& target) const {
  if (count_ != 1) r = count_ == 0 ? at::zeros_like(r) : r * count_;
  std::vector<int64_t> kept = shape_;
  for (int64_t d : dims_) kept[d] = 1;
  return r.expand(kept).reshape(target.sizes());
}

void passUndefinedGradients(AutogradContext* ctx, size_t operands) {
  ctx->set_materialize_grads(false);
  ctx->saved_data["operands"] = static_cast<int64_t>(operands);
}

std::optional<variable_list> noGradients(AutogradContext* ctx, const variable_list& grads, size_t arguments) {
  for (const at::Tensor& g : grads)
    if (g.defined()) return std::nullopt;
  return variable_list(static_cast<size_t>(ctx->saved_data["operands"].toInt()) + arguments);
}

at::Tensor atenGradient(const std::function<at::Tensor(at::TensorList)>& reference, at::TensorList saved, size_t i,
                        const at::Tensor& incoming) {
  const bool createGraph = at::GradMode::is_enabled();
  if (createGraph) TSFUSE_LOG(kernel, info, "gradient of operand ", i, " through ATen: a double backward");
  at::AutoGradMode enable(true);
  std::vector<at::Tensor> ops = saved.vec();
  if (!createGraph)
    for (auto& t : ops) t = t.detach().requires_grad_(t.requires_grad());
  const at::Tensor value = reference(ops);
  if (!value.requires_grad()) return at::Tensor();  // (no path from the operands: a zero gradient)
  return torch::autograd::grad({value}, {ops[i]}, {incoming}, /*retain_graph=*/createGraph, createGraph,
                               /*allow_unused=*/true)[0];
}

}  // namespace grad

// The operands as the fused op's autograd node reads them: those no gradient reaches detached.
// (Passed to apply as a TensorList: autograd finds the inputs that require grad in that, not in a
// std::vector.)
std::vector<at::Tensor> withEdges(const std::shared_ptr<const Expr>& e, at::TensorList operands) {
  std::vector<at::Tensor> out = operands.vec();
  const std::vector<bool> reached = reachedByGradient(e, operands);
  for (size_t i = 0; i < out.size(); ++i)
    if (!reached[i] && out[i].defined() && out[i].requires_grad()) out[i] = out[i].detach();
  return out;
}

at::Tensor pairwiseWithGradient(at::TensorList operands, c10::string_view expr) {
  const auto e = cachedExpr(std::string(expr));
  if (!outputRequiresGrad(e, operands)) {
    at::NoGradGuard off;
    return pairwise(operands, std::string(expr));
  }
  const std::vector<at::Tensor> read = withEdges(e, operands);
  return PairwiseFunction::apply(at::TensorList(read), std::string(expr));
}

std::optional<at::Tensor> reduceWithGradient(at::TensorList operands, c10::string_view expr, c10::string_view reduction,
                                             at::OptionalIntArrayRef dim, bool keepdim,
                                             std::optional<c10::ScalarType> dtype,
                                             std::optional<c10::string_view> epilogue) {
  if (dtype || epilogue) return std::nullopt;
  std::optional<std::vector<int64_t>> d;
  if (dim) d = dim->vec();
  const ReduceSpec spec = makeReduceSpec(reduction, dim, keepdim, std::nullopt);
  if (!grad::hasAdjoint(spec)) return std::nullopt;
  const auto e = cachedExpr(std::string(expr));
  if (!outputRequiresGrad(e, operands)) {
    at::NoGradGuard off;
    return tsfuse::reduce(operands, std::string(expr), std::string(reduction), d, keepdim, std::nullopt);
  }
  const std::vector<at::Tensor> read = withEdges(e, operands);
  return ReduceFunction::apply(at::TensorList(read), std::string(expr), std::string(reduction), d, keepdim);
}

}  // namespace tsfuse
