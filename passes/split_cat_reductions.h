// split_cat_reductions: a min or max over the dim a stack or cat made is an elementwise min or max
// of its pieces, so the stacked tensor is never built and the pieces can fuse with what made them.
// Detection assigners spell "is the point inside the box" this way:
//   deltas = torch.stack([l, t, r, b], dim=2)          # four [N, M] pairwise differences
//   inside = deltas.min(dim=2)[0] > 0                  # canonicalize: amin(deltas, [2], False)
// becomes minimum(minimum(minimum(l, t), r), b) > 0: one pairwise op, nothing of [N, M, 4] stored.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// The rewrites (every use of the stacked tensor must be such a reduction; the list has >= 2
// pieces and nothing else reads it; d, the reduction's dim and keepdim are constants):
//   amin|amax(stack([p0, ..., pk], d), [d], keepdim)
//       -> contiguous(minimum|maximum(cat_piece(p0, p0, 0, d, True), ..., cat_piece(pk, p0, k, d,
//          True))), unsqueezed at d with keepdim (contiguous: a reduction's result is dense)
//   amin|amax(cat([unsqueeze(p0, d), ...], d), [d], keepdim)   (pieces of size 1 along d)
//       -> the same over cat_piece(unsqueeze(pi, d), unsqueeze(p0, d), i, d, False), selected at
//          index 0 of d without keepdim
// tsfuse::cat_piece (kernels/ir/ops.def) keeps the stack's or cat's errors (dim out of range,
// pieces of other sizes, where minimum would broadcast); min and max pick the same values in either
// form (NaN propagates; each join takes the later piece first, so that of two zeros of opposite
// sign the earlier piece wins, as in eager's amin/amax along a row: docs/exactness.md).
// any/all over the dim are logical_or/logical_and of the pieces where every piece is provably
// bool (any of a uint8 tensor is uint8). A cat of pieces longer than 1 along d is left: amin over
// an empty piece raises where the cat does not. Returns whether the graph changed.
bool SplitCatReductions(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
