// The generated-kernel tests' backward corpus: the fused calls a training step's backward makes for
// the bench's forward + backward workloads (bench/workloads.py: the Gaussian kernel sum, Chamfer's
// minima, the pairwise L1 distance, a box overlap, a logsumexp), one per operand that takes a
// gradient: its gradient program (grad::gradientProgram, the registry's derivatives composed with the
// reduction's adjoint) summed over the dims the operand was broadcast along. Each case keeps autograd's
// gradient of the forward, which the program's value, shaped as the operand (grad::SumOver), must
// match within the reordered-sum tolerance.
#pragma once

#include "gpu_corpus.h"

#include "kernels/runtime/fused_grad.h"
#include "tsfuse/ops.h"

#include <torch/csrc/autograd/autograd.h>

namespace tsfuse_gpu {

struct GradientCase {
  GpuCase call;        // the backward's fused call
  at::Tensor want;     // eager's gradient of the operand
  at::Tensor operand;  // the operand (its shape)
  tsfuse::grad::SumOver sum;
};

// The backward calls of forward `e` over `ops` (reduced by `spec`, or elementwise) for a random
// incoming gradient; operands that take no gradient (a None program) give none.
inline std::vector<GradientCase> backwardOf(Gen& g, const std::string& label, const std::string& text, const T& ops,
                                            const std::optional<tsfuse::ReduceSpec>& spec) {
  namespace grad = tsfuse::grad;
  const tsfuse::Expr e = tsfuse::Expr::parse(text);
  const std::vector<int64_t> shape = grad::spanOf(e, ops);
  // Eager's gradients through the reference, by autograd.
  T leaves;
  for (const at::Tensor& t : ops) leaves.push_back(t.detach().clone().requires_grad_(t.is_floating_point()));
  at::Tensor value = tsfuse::evalAten(e, leaves);
  if (spec) value = tsfuse::applyReduction(*spec, value);
  const at::Tensor incoming = g.tensor(value.sizes().vec(), value.scalar_type());
  T floating;
  for (const at::Tensor& t : leaves)
    if (t.requires_grad()) floating.push_back(t);
  const auto wants = torch::autograd::grad({value}, floating, {incoming}, /*retain_graph=*/true,
                                           /*create_graph=*/false, /*allow_unused=*/true);
  // The reduction's adjoint, its folds as the runtime's backward makes them (on the CPU).
  std::optional<grad::Adjoint> adjoint = grad::Adjoint{nullptr, {incoming}};
  if (spec) adjoint = grad::adjointOf(*spec, shape, incoming, value.detach(), grad::foldOf(e, *spec, ops, shape));
  std::vector<GradientCase> cs;
  for (size_t i = 0, f = 0; i < ops.size(); ++i) {
    if (!leaves[i].requires_grad()) continue;
    const at::Tensor want = wants[f++];
    const tsfuse::Gradient p = grad::gradientProgram(e, static_cast<int>(i), ops, *adjoint);
    if (p.status != tsfuse::Gradient::Status::Flows || !want.defined()) continue;
    T all = ops;
    all.insert(all.end(), adjoint->operands.begin(), adjoint->operands.end());
    grad::SumOver sum(grad::spanOf(p.expr, all), shape, grad::broadcastDims(ops[i].sizes(), shape));
    GpuCase call{"gradient of " + label + " $" + std::to_string(i), p.expr.str(), all, {}};
    if (!sum.spanned.empty()) call.reduce = red(tsfuse::Reduction::Sum, sum.spanned, /*keepdim=*/true);
    cs.push_back({std::move(call), want, ops[i], std::move(sum)});
  }
  return cs;
}

inline std::vector<GradientCase> gradientCases(uint64_t seed) {
  using tsfuse::Reduction;
  Gen g(seed);
  std::vector<GradientCase> cs;
  auto add = [&](std::vector<GradientCase> more) {
    for (auto& c : more) cs.push_back(std::move(c));
  };
  for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
    at::Tensor x = g.tensor({41, 1}, dt), y = g.tensor({1, 37}, dt);
    add(backwardOf(g, "Gaussian kernel sum", "v1: sub($0, $1); mul(%0, %0); neg(%1); div(%2, 0.7); exp(%3)", {x, y},
                   red(Reduction::Sum, std::vector<int64_t>{1})));
    at::Tensor p = g.tensor({23, 1, 3}, dt), q = g.tensor({1, 29, 3}, dt);
    add(backwardOf(g, "pairwise L1", "v1: sub($0, $1); abs(%0)", {p, q}, red(Reduction::Mean, std::nullopt)));
    for (int64_t d : {0, 1}) {
      tsfuse::ReduceSpec nearest = red(Reduction::Amin, std::vector<int64_t>{d});
      add(backwardOf(g, "Chamfer minimum", "v1: sub($0, $1); mul(%0, %0)", {x, y}, nearest));
      nearest.routesGradient = true;
      add(backwardOf(g, "Chamfer min(dim) values", "v1: sub($0, $1); mul(%0, %0)", {x, y}, nearest));
    }
    add(backwardOf(g, "soft assignment", "v1: sub($0, $1); mul(%0, %0); neg(%1)", {x, y},
                   red(Reduction::Logsumexp, std::vector<int64_t>{1})));
    at::Tensor a = g.tensor({19, 1, 2}, dt), b = g.tensor({1, 17, 2}, dt);
    add(backwardOf(g, "box overlap", "v1: maximum($0, $1); minimum($0, $1); sub(%1, %0); clamp(%2, 0, None)", {a, b},
                   std::nullopt));
  }
  return cs;
}

}  // namespace tsfuse_gpu
