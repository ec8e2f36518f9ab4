#include "kernels/runtime/fused_grad.h"

#include "kernels/reference/analysis.h"
#include "kernels/reference/backward.h"
#include "kernels/runtime/reduce_spec.h"
#include "tsfuse/log.h"
#include "tsfuse/ops.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <ATen/ExpandUtils.h>
#include <c10/core/WrapDimMinimal.h>

namespace tsfuse {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The shape of the program's value: its operands broadcast (numbers too, as 0-dim tensors).
std::vector<int64_t> valueShape(const variable_list& operands) {
  std::vector<int64_t> shape;
  for (const at::Tensor& t : operands) shape = at::infer_size(shape, t.sizes());
  return shape;
}

// Each needed operand's gradient given the saved operands, their value's `shape`, and `grad`, the
// incoming gradient broadcastable to that value (a reduction's with its dims kept, a mean's divided
// by their count); `incoming` is the gradient as autograd gave it, for the unfused path.
variable_list operandGradients(AutogradContext* ctx, const variable_list& saved, const std::vector<int64_t>& shape,
                               const Expr& e, const ReduceSpec* reduce, const at::Tensor& grad,
                               const at::Tensor& incoming) {
  const bool createGraph = at::GradMode::is_enabled();
  variable_list out(ctx->saved_data["arguments"].toInt() + saved.size());
  auto reference = [&](at::TensorList ops) {
    at::Tensor v = evalAten(e, ops);
    return reduce ? applyReduction(*reduce, v) : v;
  };
  for (size_t i = 0; i < saved.size(); ++i) {
    if (!ctx->needs_input_grad(i) || !grad.defined()) continue;
    std::optional<at::Tensor> g;
    if (!createGraph) g = grad::fusedGradient(e, static_cast<int>(i), saved, shape, grad);
    out[i] = g ? *g : grad::atenGradient(reference, saved, i, incoming);
  }
  return out;
}

struct PairwiseFunction : torch::autograd::Function<PairwiseFunction> {
  static at::Tensor forward(AutogradContext* ctx, at::TensorList operands, const std::string& expr) {
    ctx->saved_data["expr"] = expr;
    ctx->saved_data["arguments"] = int64_t{1};
    ctx->save_for_backward(operands.vec());
    return pairwise(operands, expr);  // below autograd: grad mode is off in a custom forward
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto e = cachedExpr(ctx->saved_data["expr"].toStringRef());
    const variable_list saved = ctx->get_saved_variables();
    return operandGradients(ctx, saved, valueShape(saved), *e, nullptr, grads[0], grads[0]);
  }
};

struct ReduceFunction : torch::autograd::Function<ReduceFunction> {
  static at::Tensor forward(AutogradContext* ctx, at::TensorList operands, const std::string& expr,
                            const std::string& reduction, std::optional<std::vector<int64_t>> dim, bool keepdim) {
    ctx->saved_data["expr"] = expr;
    ctx->saved_data["reduction"] = reduction;
    ctx->saved_data["dim"] = dim ? c10::IValue(*dim) : c10::IValue();
    ctx->saved_data["keepdim"] = keepdim;
    ctx->saved_data["arguments"] = int64_t{4};
    ctx->save_for_backward(operands.vec());
    return tsfuse::reduce(operands, expr, reduction, dim, keepdim, std::nullopt);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto e = cachedExpr(ctx->saved_data["expr"].toStringRef());
    const std::string reduction = ctx->saved_data["reduction"].toStringRef();
    const c10::IValue dimArg = ctx->saved_data["dim"];
    const bool keepdim = ctx->saved_data["keepdim"].toBool();
    std::optional<std::vector<int64_t>> dim;
    if (!dimArg.isNone()) dim = dimArg.toIntVector();
    ReduceSpec spec = makeReduceSpec(reduction, dim ? at::OptionalIntArrayRef(*dim) : std::nullopt, keepdim,
                                     std::nullopt, std::nullopt);
    const variable_list saved = ctx->get_saved_variables();
    const std::vector<int64_t> shape = valueShape(saved);
    const int64_t rank = static_cast<int64_t>(shape.size());
    std::vector<bool> reduced(rank, !dim || dim->empty());
    if (dim)
      for (int64_t d : *dim) reduced[c10::maybe_wrap_dim(d, rank)] = true;
    at::Tensor g = grads[0];
    int64_t count = 1;
    for (int64_t d = 0; d < rank; ++d) {
      if (!reduced[d]) continue;
      count *= shape[d];
      if (!keepdim) g = g.unsqueeze(d);
    }
    if (spec.kind == Reduction::Mean) g = g / count;
    return operandGradients(ctx, saved, shape, *e, &spec, g, grads[0]);
  }
};

}  // namespace

namespace grad {

std::vector<int64_t> broadcastDims(at::IntArrayRef operand, at::IntArrayRef value) {
  std::vector<int64_t> dims;
  const int64_t lead = static_cast<int64_t>(value.size() - operand.size());
  for (int64_t d = 0; d < static_cast<int64_t>(value.size()); ++d)
    if (d < lead || (operand[d - lead] == 1 && value[d] != 1)) dims.push_back(d);
  return dims;
}

std::optional<at::Tensor> fusedGradient(const Expr& e, int wrt, at::TensorList operands, at::IntArrayRef shape,
                                        const at::Tensor& grad) {
  const Gradient g = gradientOf(e, wrt, operands);
  if (g.status == Gradient::Status::None) return at::Tensor();
  if (g.status == Gradient::Status::Unsupported) {
    TSFUSE_LOG(kernel, info, "gradient of operand ", wrt, " of '", e.str(), "' through ATen: ", g.why);
    return std::nullopt;
  }
  std::vector<at::Tensor> ops = operands.vec();
  ops.push_back(grad);
  const at::Tensor& target = operands[wrt];
  const std::vector<int64_t> dims = broadcastDims(target.sizes(), shape);
  at::Tensor r = dims.empty() ? pairwise(ops, g.expr.str())
                              : tsfuse::reduce(ops, g.expr.str(), "sum", dims, /*keepdim=*/true, std::nullopt);
  return r.reshape(target.sizes());
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
  if (dtype || epilogue || (reduction != "sum" && reduction != "mean")) return std::nullopt;
  std::optional<std::vector<int64_t>> d;
  if (dim) d = dim->vec();
  return ReduceFunction::apply(operands, std::string(expr), std::string(reduction), d, keepdim);
}

}  // namespace tsfuse
