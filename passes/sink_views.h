// sink_views: a view of an elementwise intermediate is pushed down to its leaves, so the
// intermediate is never stored and the fusion passes see one expression (torchvision's
// `wh = (rb - lt).clamp(min=0); inter = wh[:, :, 0] * wh[:, :, 1]` never computes [N,M,2]):
//   select(f(l...), d, i) -> f(tsfuse::broadcast_select([l...], d, i)...), and so slice, unsqueeze
// f, the maximal elementwise subexpression producing the intermediate, is duplicated per view;
// the broadcast_* ops resolve `d` at call time (kernels/runtime/broadcast_views.cpp).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// Applied only when every use of the intermediate is such a view, every use of each view only
// reads values (elementwise ops, reductions, further views), nothing writes the intermediate or
// the views, nothing writes the leaves between the subexpression's first node and the view (the
// copies read them at the view), and, for select, the intermediate provably has rank >= 2 (so the
// helper can keep every leaf's 0-dim-ness, which type promotion depends on; the rank is bounded
// through views, chunk/split/unbind, transpose/permute/view/reshape/expand/repeat and elementwise
// ops). Otherwise rejected with a reason.
bool SinkViews(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
