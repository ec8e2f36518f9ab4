// sink_views: views of elementwise intermediates are pushed down to the intermediates' leaves, so
// that e.g. torchvision's
//
//   wh = (rb - lt).clamp(min=0)            # [N,M,2] intermediate
//   inter = wh[:, :, 0] * wh[:, :, 1]      # [N,M]
//
// becomes one elementwise expression over views of rb's and lt's leaves (the [N,M,2] tensor is
// never computed), which the fusion passes then turn into one op:
//
//   select(f(l...), d, i)          -> f(tsfuse::broadcast_select([l...], d, i)...)
//   slice(f(l...), d, s, e, step)  -> f(tsfuse::broadcast_slice([l...], d, s, e, step)...)
//   unsqueeze(f(l...), d)          -> f(tsfuse::broadcast_unsqueeze([l...], d)...)
//
// f is the maximal elementwise subexpression producing the intermediate (its inner values used
// only inside it); it is duplicated per view (cheap elementwise work instead of a stored
// intermediate). The broadcast_* ops resolve `d` against the leaves' broadcast shape at call time
// (kernels/runtime/broadcast_views.cpp), so unknown static ranks cannot pick a wrong dim.
//
// Applied only when every use of the intermediate is such a view, every use of each view only
// reads values (elementwise ops, reductions, further views), nothing writes the intermediate or
// the views, nothing writes the leaves between the subexpression's first node and the view (the
// copies read them at the view; writes before or after are seen alike), and, for select, the
// intermediate provably has rank >= 2 (so the result is not 0-dim and the helper can keep every
// leaf's 0-dim-ness, which type promotion depends on): the rank is bounded through views,
// chunk/split/unbind (unpacked or indexed), transpose/permute/view/reshape/expand/repeat and
// elementwise ops. Otherwise rejected with a reason.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

bool SinkViews(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
