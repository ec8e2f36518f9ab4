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

// The shape of the program's value: its operands broadcast (numbers too, as 0-dim tensors).
std::vector<int64_t> valueShape(at::TensorList operands) {
  std::vector<int64_t> shape;
  for (const at::Tensor& t : operands) shape = at::infer_size(shape, t.sizes());
  return shape;
}

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

struct PairwiseFunction : torch::autograd::Function<PairwiseFunction> {
  static at::Tensor forward(AutogradContext* ctx, at::TensorList operands, const std::string& expr) {
    ctx->saved_data["expr"] = expr;
    ctx->save_for_backward(operands.vec());
    return pairwise(operands, expr);  // below autograd: grad mode is off in a custom forward
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto e = cachedExpr(ctx->saved_data["expr"].toStringRef());
    const variable_list saved = ctx->get_saved_variables();
    auto reference = [&](at::TensorList ops) { return evalAten(*e, ops); };
    return operandGradients(ctx, 1, saved, valueShape(saved), *e, grad::Adjoint{nullptr, {grads[0]}}, reference,
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
    at::Tensor out = tsfuse::reduce(operands, expr, reduction, dim, keepdim, std::nullopt);
    std::vector<at::Tensor> saved = operands.vec();
    if (grad::readsResult(
            makeReduceSpec(reduction, dim ? at::OptionalIntArrayRef(*dim) : std::nullopt, keepdim, std::nullopt)))
      saved.push_back(out);
    ctx->save_for_backward(saved);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
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
    const std::vector<int64_t> shape = valueShape(saved);
    auto fold = [&](const Expr* tail, const std::vector<at::Tensor>& extra, const std::string& reduction) {
      std::vector<at::Tensor> ops = saved;
      ops.insert(ops.end(), extra.begin(), extra.end());
      return tsfuse::reduce(ops, grad::compose(*e, tail, static_cast<int64_t>(extra.size())).str(), reduction,
                            reducedDims(spec, static_cast<int64_t>(shape.size())), /*keepdim=*/true, std::nullopt);
    };
    std::optional<grad::Adjoint> adjoint;
    if (grads[0].defined() && !at::GradMode::is_enabled())
      adjoint = grad::adjointOf(spec, shape, grads[0], result, fold);
    auto reference = [&](at::TensorList ops) { return applyReduction(spec, evalAten(*e, ops)); };
    return operandGradients(ctx, 4, saved, shape, *e, adjoint, reference, grads[0]);
  }
};

std::shared_ptr<const Expr> program(const char* text) { return cachedExpr(text); }

}  // namespace

namespace grad {

bool readsResult(const ReduceSpec& r) {
  return r.kind == Reduction::Amax || r.kind == Reduction::Amin || r.kind == Reduction::Logsumexp;
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

std::optional<at::Tensor> fusedGradient(const Expr& e, int wrt, at::TensorList operands, at::IntArrayRef shape,
                                        const Adjoint& adjoint) {
  const Gradient g = gradientOf(e, wrt, operands);
  if (g.status == Gradient::Status::None) return at::Tensor();
  if (g.status == Gradient::Status::Unsupported) {
    TSFUSE_LOG(kernel, info, "gradient of operand ", wrt, " of '", e.str(), "' through ATen: ", g.why);
    return std::nullopt;
  }
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
  std::vector<at::Tensor> ops = operands.vec();
  ops.insert(ops.end(), adjoint.operands.begin(), adjoint.operands.end());
  const at::Tensor& target = operands[wrt];
  const std::vector<int64_t> dims = broadcastDims(target.sizes(), shape);
  at::Tensor r =
      dims.empty() ? pairwise(ops, p.str()) : tsfuse::reduce(ops, p.str(), "sum", dims, /*keepdim=*/true, std::nullopt);
  return shapedAs(r, shape, dims, target);
}

at::Tensor shapedAs(const at::Tensor& r, at::IntArrayRef shape, const std::vector<int64_t>& dims,
                    const at::Tensor& target) {
  std::vector<int64_t> kept = shape.vec();
  for (int64_t d : dims) kept[d] = 1;
  return r.expand(kept).reshape(target.sizes());
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
  return torch::autograd::grad({value}, {ops[i]}, {incoming}, /*retain_graph=*/createGraph, createGraph,
                               /*allow_unused=*/true)[0];
}

}  // namespace grad

at::Tensor pairwiseWithGradient(at::TensorList operands, c10::string_view expr) {
  return PairwiseFunction::apply(operands, std::string(expr));
}

std::optional<at::Tensor> reduceWithGradient(at::TensorList operands, c10::string_view expr, c10::string_view reduction,
                                             at::OptionalIntArrayRef dim, bool keepdim,
                                             std::optional<c10::ScalarType> dtype,
                                             std::optional<c10::string_view> epilogue) {
  if (dtype || epilogue) return std::nullopt;
  std::optional<std::vector<int64_t>> d;
  if (dim) d = dim->vec();
  const ReduceSpec spec = makeReduceSpec(reduction, dim, keepdim, std::nullopt);
  if (spec.kind != Reduction::Sum && spec.kind != Reduction::Mean && !grad::readsResult(spec)) return std::nullopt;
  return ReduceFunction::apply(operands, std::string(expr), std::string(reduction), d, keepdim);
}

}  // namespace tsfuse
