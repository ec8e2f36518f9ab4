// reduce_chain's backward where stage 1 is max/min(dim)'s values (kernels/runtime/chain_grad.h):
// the whole gradient of each output goes to the one index it returns, so an operand's gradient is
// the chain's gradient at those indices alone. Chamfer's min over j of |x_i - y_j|^2:
//
//   index    j*(i) = argmin_j of stage 0's value              (one fused pass, as the forward's)
//   gather   operands varying along j read at j*(i): y -> y[j*(i)]                   [N, 1, D]
//   chain'   stage 0 as given, stage 1 a sum over the (now size-1) dim j, the incoming gradient
//            unmasked: the fused backward over [N, 1, D] instead of [N, M, D]
//   scatter  a gathered operand's gradient added into its rows j*(i) (index_put_, accumulate)
//
// So the backward folds the broadcast space once (for the index) instead of once per operand, and
// each operand's gradient is within the summation-order tolerance of eager's, which routes to the
// same index (ATen's value_selecting_reduction_backward).
#include "kernels/reference/analysis.h"
#include "kernels/runtime/chain_grad.h"
#include "kernels/runtime/chain_text.h"
#include "kernels/runtime/reduce_spec.h"
#include "tsfuse/ops.h"

#include <algorithm>

namespace tsfuse {
namespace {

// `t` right-aligned to a space of `rank` dims (size-1 dims in front), as a view.
at::Tensor aligned(const at::Tensor& t, int64_t rank) {
  at::Tensor v = t;
  while (v.dim() < rank) v = v.unsqueeze(0);
  return v;
}

// A space operands live in (S0 or S1), the routed dim k in its numbering, and the index expanded to
// the space with dim k of size 1 (the gathered shape).
struct Routed {
  std::vector<int64_t> space;
  int64_t k = 0;
  at::Tensor index;
};

// An operand of r's space read at r's index along k.
at::Tensor gathered(const at::Tensor& t, const Routed& r) {
  return aligned(t, static_cast<int64_t>(r.space.size())).expand(r.space).gather(r.k, r.index);
}

// The gradient of operand `t` from its gathered copy's gradient `g` (the gathered shape): each value
// added at the position it was read from.
at::Tensor scattered(const at::Tensor& t, const Routed& r, const at::Tensor& g) {
  const int64_t rank = static_cast<int64_t>(r.space.size());
  at::Tensor out = at::zeros_like(t);
  at::Tensor view = aligned(out, rank);
  c10::List<std::optional<at::Tensor>> indices;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == r.k) {
      indices.push_back(r.index);
    } else if (view.size(d) == 1) {
      indices.push_back(at::zeros({1}, r.index.options()).view(std::vector<int64_t>(rank, 1)));
    } else {
      std::vector<int64_t> along(rank, 1);
      along[d] = r.space[d];
      indices.push_back(at::arange(r.space[d], r.index.options()).view(along));
    }
  }
  view.index_put_(indices, g, /*accumulate=*/true);
  return out;
}

}  // namespace

std::optional<std::vector<std::optional<at::Tensor>>> grad::routedChainGradients(const Chain& c, at::TensorList ops,
                                                                                 const at::Tensor& g,
                                                                                 const std::vector<bool>& needed) {
  const ReduceSpec& s1 = c.stages[1];
  if (!s1.routesGradient || s1.epilogue || c.normalize[1]) return std::nullopt;
  const ReduceSpec& s0 = c.stages[0];
  const size_t n0 = c.expr->numInputs, first1 = c.firstOperand[1];
  std::optional<Analysis> a0 = analyze(*c.expr, ops.slice(0, first1), &s0);
  if (!a0) return std::nullopt;
  const std::vector<int64_t> space0 = a0->valueShape;
  const auto rank0 = static_cast<int64_t>(space0.size());
  const std::vector<int64_t> reduced0 = reducedDims(s0, rank0);
  // Stage 1's value space S1 (stage 0's reduced value, or the fused input's broadcast with it).
  std::vector<int64_t> space1 = a0->outSizes;
  const at::TensorList inputs1 = c.inputOperands(ops, 1);
  for (const at::Tensor& t : inputs1) space1 = at::infer_size(space1, t.sizes());
  const auto rank1 = static_cast<int64_t>(space1.size());
  const std::vector<int64_t> reduced1 = reducedDims(s1, rank1);
  if (reduced1.size() != 1 || rank1 != static_cast<int64_t>(a0->outSizes.size())) return std::nullopt;
  const int64_t k1 = reduced1[0];
  // k1 in S0's numbering: S1 is S0 without stage 0's reduced dims unless it keeps them.
  int64_t k0 = k1;
  if (!s0.keepdim)
    for (int64_t d : reduced0)
      if (d <= k0) ++k0;
  // A dim stage 0 reduces and keeps (size 1 in S1): each output's one index there stands for the
  // whole of S0 along it, which routing would cut to its first row.
  if (std::find(reduced0.begin(), reduced0.end(), k0) != reduced0.end()) return std::nullopt;

  // The index each output routes to, kept as a size-1 dim k1 of S1 (one fused pass).
  const ReduceSpec argSpec =
      makeReduceSpec(s1.kind == Reduction::Amax ? "argmax" : "argmin", reduced1, /*keepdim=*/true, std::nullopt);
  std::vector<at::Tensor> foldOps = ops.slice(0, first1).vec();
  foldOps.insert(foldOps.end(), inputs1.begin(), inputs1.end());
  const at::Tensor index1 =
      reduceChain(foldOps, c.expr->str(), {c.stageTexts()[0], stageText(false, c.input[1].get(), argSpec)});
  at::Tensor index0 = index1;
  if (!s0.keepdim)
    for (int64_t d : reduced0) index0 = index0.unsqueeze(d);
  auto routed = [](std::vector<int64_t> space, int64_t k, const at::Tensor& index) {
    std::vector<int64_t> narrow = space;
    narrow[k] = 1;
    return Routed{std::move(space), k, index.expand(narrow)};
  };
  const Routed r0 = routed(space0, k0, index0), r1 = routed(space1, k1, index1);

  // Operands varying along the routed dim, read at the index; the rest as they are.
  std::vector<at::Tensor> ops2 = ops.vec();
  std::vector<const Routed*> readAt(ops.size(), nullptr);
  for (size_t i = 0; i < first1 + inputs1.size(); ++i) {
    const Routed& r = i < n0 ? r0 : r1;
    const at::Tensor& t = ops[i];
    if (t.dim() == 0 || aligned(t, static_cast<int64_t>(r.space.size())).size(r.k) == 1) continue;
    ops2[i] = gathered(t, r);
    readAt[i] = &r;
  }
  // chain': stage 1 a sum over the routed dim, now of size 1; its gradient the incoming one, kept.
  ReduceSpec sum;
  sum.dims = reduced1;
  sum.keepdim = true;
  const auto c2 = cachedChain(c.expr->str(), {c.stageTexts()[0], stageText(false, c.input[1].get(), sum)});
  const at::Tensor g2 = s1.keepdim ? g : g.unsqueeze(k1);
  std::vector<std::optional<at::Tensor>> out = chainGradients(*c2, ops2, at::Tensor(), g2, needed);
  // A gathered operand's gradient has its gathered copy's shape: added back where it was read.
  for (size_t i = 0; i < out.size(); ++i)
    if (readAt[i] && out[i] && out[i]->defined()) out[i] = scattered(ops[i], *readAt[i], *out[i]);
  return out;
}

}  // namespace tsfuse
