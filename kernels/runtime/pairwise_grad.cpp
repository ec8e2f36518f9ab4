#include "kernels/runtime/pairwise_grad.h"

#include "kernels/reference/analysis.h"
#include "kernels/reference/backward.h"
#include "tsfuse/log.h"
#include "tsfuse/ops.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

namespace tsfuse {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The dims of `value`'s shape that `operand` was broadcast along (its missing leading dims and its
// size-1 dims where the value's size is not 1).
std::vector<int64_t> broadcastDims(at::IntArrayRef operand, at::IntArrayRef value) {
  std::vector<int64_t> dims;
  const int64_t lead = static_cast<int64_t>(value.size() - operand.size());
  for (int64_t d = 0; d < static_cast<int64_t>(value.size()); ++d)
    if (d < lead || (operand[d - lead] == 1 && value[d] != 1)) dims.push_back(d);
  return dims;
}

// ATen's autograd through the region's reference, recomputed from the saved operands; with
// `createGraph`, differentiable again.
at::Tensor unfusedGradient(const Expr& e, const variable_list& saved, size_t i, const at::Tensor& grad,
                           bool createGraph) {
  at::AutoGradMode enable(true);
  std::vector<at::Tensor> ops = saved;
  if (!createGraph)
    for (auto& t : ops) t = t.detach().requires_grad_(t.requires_grad());
  at::Tensor value = evalAten(e, ops);
  auto g = torch::autograd::grad({value}, {ops[i]}, {grad}, /*retain_graph=*/createGraph, createGraph,
                                 /*allow_unused=*/true);
  return g[0];
}

struct PairwiseFunction : torch::autograd::Function<PairwiseFunction> {
  static at::Tensor forward(AutogradContext* ctx, at::TensorList operands, const std::string& expr) {
    ctx->saved_data["expr"] = expr;
    ctx->save_for_backward(operands.vec());
    return pairwise(operands, expr);  // below autograd: grad mode is off in a custom forward
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const std::string text = ctx->saved_data["expr"].toStringRef();
    const std::shared_ptr<const Expr> e = cachedExpr(text);
    const at::Tensor& g = grads[0];
    const bool createGraph = at::GradMode::is_enabled();
    variable_list out(saved.size() + 1);
    for (size_t i = 0; i < saved.size(); ++i) {
      if (!ctx->needs_input_grad(i) || !g.defined()) continue;
      Gradient grad = createGraph ? Gradient{Gradient::Status::Unsupported, {}, "a double backward"}
                                  : gradientOf(*e, static_cast<int>(i), saved);
      if (grad.status == Gradient::Status::None) continue;
      if (grad.status == Gradient::Status::Unsupported) {
        TSFUSE_LOG(kernel, info, "gradient of operand ", i, " of '", text, "' through ATen: ", grad.why);
        out[i] = unfusedGradient(*e, saved, i, g, createGraph);
        continue;
      }
      std::vector<at::Tensor> ops = saved;
      ops.push_back(g);
      const std::vector<int64_t> dims = broadcastDims(saved[i].sizes(), g.sizes());
      at::Tensor r = dims.empty() ? pairwise(ops, grad.expr.str())
                                  : reduce(ops, grad.expr.str(), "sum", dims, /*keepdim=*/true, std::nullopt);
      out[i] = r.reshape(saved[i].sizes());
    }
    return out;
  }
};

}  // namespace

at::Tensor pairwiseWithGradient(at::TensorList operands, c10::string_view expr) {
  return PairwiseFunction::apply(operands, std::string(expr));
}

}  // namespace tsfuse
