// tsfuse::reduce_sweep's autograd: the forward runs fused, and an operand's gradient is the sum over
// the branches of its gradient through the chain [stage 0, branch] (kernels/runtime/chain_grad.h),
// one fused chain per branch whose output has a gradient. Chamfer's two minima of the summed
// squares train so; a sweep whose branch has an epilogue or no fused backward runs ATen's autograd
// through the reference.
#include "kernels/runtime/chain_grad.h"
#include "kernels/runtime/fused_grad.h"
#include "kernels/runtime/sweep.h"
#include "tsfuse/log.h"
#include "tsfuse/ops.h"

#include <torch/csrc/autograd/custom_function.h>

namespace tsfuse {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The positions of branch j's operands (Sweep::branchOperands) within the sweep's.
std::vector<size_t> branchPositions(const Sweep& s, size_t j) {
  const Chain& all = s.all;
  std::vector<size_t> out;
  for (size_t i = 0; i < all.firstOperand[1]; ++i) out.push_back(i);
  const size_t end = j + 2 < all.stages.size() ? all.firstOperand[j + 2] : all.numOperands;
  for (size_t i = all.firstOperand[j + 1]; i < end; ++i) out.push_back(i);
  return out;
}

std::string whyNotFused(const Sweep& s) {
  for (const auto& b : s.branches) {
    if (b->stages[1].epilogue) return "a branch with an epilogue";
    if (std::string why = grad::whyNotFused(*b); !why.empty()) return why;
  }
  return {};
}

struct SweepFunction : torch::autograd::Function<SweepFunction> {
  static variable_list forward(AutogradContext* ctx, at::TensorList operands, const std::string& expr,
                               const std::vector<std::string>& stages) {
    ctx->saved_data["expr"] = expr;
    ctx->saved_data["stages"] = grad::joinStages(stages);
    grad::passUndefinedGradients(ctx, operands.size());
    variable_list out = reduceSweep(operands, expr, stages);
    std::vector<at::Tensor> saved = operands.vec();
    saved.insert(saved.end(), out.begin(), out.end());  // each branch's result (its r1: no epilogue)
    ctx->save_for_backward(saved);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (auto none = grad::noGradients(ctx, grads, 2)) return *none;
    const auto s =
        cachedSweep(ctx->saved_data["expr"].toStringRef(), grad::splitStages(ctx->saved_data["stages"].toStringRef()));
    variable_list saved = ctx->get_saved_variables();
    const variable_list results(saved.end() - static_cast<std::ptrdiff_t>(grads.size()), saved.end());
    saved.resize(saved.size() - grads.size());
    variable_list out(2 + saved.size());
    std::vector<at::Tensor> sum(saved.size());
    std::vector<bool> throughAten(saved.size(), at::GradMode::is_enabled());
    for (size_t j = 0; j < grads.size(); ++j) {
      if (!grads[j].defined()) continue;
      const std::vector<size_t> pos = branchPositions(*s, j);
      std::vector<at::Tensor> ops;
      std::vector<bool> needed;
      for (size_t i : pos) {
        ops.push_back(saved[i]);
        needed.push_back(ctx->needs_input_grad(i) && !throughAten[i]);
      }
      const std::vector<std::optional<at::Tensor>> g =
          grad::chainGradients(*s->branches[j], ops, results[j], grads[j], needed);
      for (size_t k = 0; k < pos.size(); ++k) {
        if (!needed[k]) continue;
        if (!g[k]) {
          throughAten[pos[k]] = true;
        } else if (g[k]->defined()) {
          sum[pos[k]] = sum[pos[k]].defined() ? sum[pos[k]] + *g[k] : *g[k];
        }
      }
    }
    auto reference = [&](at::TensorList ops) {
      const Outputs r = evalSweep(*s, ops);
      at::Tensor total;
      for (size_t j = 0; j < grads.size(); ++j)
        if (grads[j].defined()) total = total.defined() ? total + (r[j] * grads[j]).sum() : (r[j] * grads[j]).sum();
      return total;
    };
    for (size_t i = 0; i < saved.size(); ++i) {
      if (!ctx->needs_input_grad(i)) continue;
      out[i] = throughAten[i] ? grad::atenGradient(reference, saved, i, at::Tensor()) : sum[i];
    }
    return out;
  }
};

}  // namespace

std::optional<std::vector<at::Tensor>> reduceSweepWithGradient(at::TensorList operands, c10::string_view expr,
                                                               c10::ArrayRef<std::string> stages) {
  const auto s = cachedSweep(expr, stages);
  if (!grad::recordsGradient(s->all, operands)) {
    at::NoGradGuard off;
    return reduceSweep(operands, std::string(expr), stages.vec());
  }
  if (const std::string why = whyNotFused(*s); !why.empty()) {
    TSFUSE_LOG(kernel, info, "reduce_sweep with a gradient runs unfused: ", why);
    return std::nullopt;
  }
  return SweepFunction::apply(operands, std::string(expr), stages.vec());
}

}  // namespace tsfuse
