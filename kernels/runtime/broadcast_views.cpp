// View-only helper ops for sink_views (passes/sink_views.h), which rewrites a view of an
// elementwise intermediate X = f(l...) into f over views of the leaves, so X is never stored:
// tsfuse::broadcast_select/slice/unsqueeze/squeeze([l...], dim, ...). `dim` is X's, which scripted graphs
// rarely know statically, so these ops resolve it at call time against the leaves' broadcast shape.
// tsfuse::broadcast_repeat(x, repeats, others): x.repeat(repeats) read only by one fused op. Like
// aten::broadcast_tensors, the schemas carry no alias annotation; sink_views emits them only where
// neither the leaves nor the outputs are written.
#include "kernels/reference/analysis.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tsfuse {
namespace {

std::vector<int64_t> broadcastShape(at::TensorList leaves) {
  std::vector<int64_t> shape;
  for (const auto& t : leaves) shape = at::infer_size(shape, t.sizes());
  return shape;
}

// Per leaf of rank r in a broadcast of rank R (aligned at the right), with d the wrapped dim of X
// and S the broadcast size at d:
//   * the leaf lacks d (d < R - r), or is 0-dim     -> unchanged (it broadcasts as before)
//   * its size at d equals S                        -> the view itself (same dim, shifted)
//   * its size at d is 1 != S (a broadcast dim)     -> slice: unchanged; select: index 0
//                                                      (the leaf of size S checks the index)
//   * unsqueeze when every leaf is 0-dim (R == 0)   -> every leaf becomes [1]
//   * select would turn a 1-D leaf into a 0-dim one -> a [1] view instead (0-dim tensors take
//     part in type promotion with a lower priority; the pass guarantees a result of rank >= 1)
// Every result is a view of its leaf (autograd sees ordinary select/slice/unsqueeze).
// The leaf's own dim for broadcast dim d, or -1 when the leaf does not reach it.
int64_t leafDim(int64_t d, int64_t R, const at::Tensor& leaf) { return d - (R - leaf.dim()); }

// True when TensorIterator could never reorder dims because of t: it orders an output's dims by
// the first operand whose strides in a pair of dims are both nonzero, swapping the pair when the
// outer dim has the smaller stride, or an equal one and the smaller size. A contiguous tensor never
// asks for a swap. With the output's shape unknown here, a size-1 dim counts as seen (its stride
// is zeroed only where the output broadcasts it).
bool neverSwaps(const at::Tensor& t) {
  for (int64_t j = 1; j < t.dim(); ++j)
    for (int64_t i = 0; i < j; ++i) {
      if (t.stride(i) == 0 || t.stride(j) == 0) continue;
      if (t.stride(j) > t.stride(i) || (t.stride(j) == t.stride(i) && t.size(j) > 1)) return false;
    }
  return true;
}

// How TensorIterator sees a tensor's layout when it orders an output's dims: for each pair of
// dims, whether either stride is zero (the pair is left to other operands) or which is larger.
// Equal results for two tensors of one shape mean every op reading either lays its output out
// the same way.
bool sameLayoutVotes(at::IntArrayRef a, at::IntArrayRef b) {
  auto vote = [](int64_t s, int64_t t) { return s == 0 || t == 0 ? 2 : (s > t) - (s < t); };
  for (size_t j = 1; j < a.size(); ++j)
    for (size_t i = 0; i < j; ++i)
      if (vote(a[i], a[j]) != vote(b[i], b[j])) return false;
  return true;
}

// The leaf views of a sunk view, laid out so that f over them has the layout eager's view of
// f(leaves) has (`layout` is f's expression over the leaves; sink_views passes it).
//
// Eager lays out X = f(leaves) by TensorIterator's dim order, then views it. f over the views is
// laid out by that order for the viewed operands, which usually agrees; but the order comes from
// an insertion sort that skips the pairs an operand leaves undecided (a zero stride), so dropping
// or inserting a dim can change how the remaining dims are ordered when some leaf is permuted.
// * no leaf ever asks for a swap and the view keeps strides in order (select, unsqueeze, slice
//   with step 1): both orders are the identity; the views as they are.
// * else both layouts are computed (analysis stand-ins, no data); where they differ, each
//   dimensioned leaf is copied, broadcast to the view's shape, into one layout with eager's
//   votes, so every op of f lays its output out that way. The copies hold the viewed shape,
//   never X's; this happens only for permuted leaves whose order the view would change.
std::vector<at::Tensor> withEagerLayout(std::vector<at::Tensor> views, at::TensorList leaves,
                                        const std::optional<std::string>& layout, bool viewKeepsOrder,
                                        const std::function<at::Tensor(const at::Tensor&)>& view) {
  if (!layout) return views;
  bool identity = viewKeepsOrder;
  for (const auto& t : leaves) identity = identity && neverSwaps(t);
  if (identity) return views;
  std::shared_ptr<const Expr> f = cachedExpr(*layout);
  std::optional<Analysis> eager = analyzeCached(f, leaves, nullptr);
  std::optional<Analysis> sunk = analyzeCached(f, views, nullptr);
  if (!eager || !sunk) return views;  // f raises: the ops over the views raise eager's error
  at::Tensor x = at::empty_strided(eager->outSizes, eager->outStrides, at::TensorOptions().device(c10::kMeta));
  at::Tensor v = view(x);
  if (v.sizes() != at::IntArrayRef(sunk->outSizes) || sameLayoutVotes(v.strides(), sunk->outStrides)) return views;
  std::vector<int64_t> strides = denseStrides(v.sizes(), strideOrder(v.sizes(), v.strides()));
  // The view's own strides, should a dense layout tie where it does not (an empty view: none).
  int64_t span = v.numel() == 0 ? 0 : 1;
  for (int64_t d = 0; span > 0 && d < v.dim(); ++d) span += (v.size(d) - 1) * v.stride(d);
  const bool dense = sameLayoutVotes(v.strides(), strides);
  for (auto& t : views) {
    if (t.dim() == 0) continue;  // no dims to vote; and it keeps its 0-dim type promotion
    at::Tensor c = dense ? at::empty_strided(v.sizes(), strides, t.options())
                         : at::empty({span}, t.options()).as_strided(v.sizes(), v.strides());
    t = c.copy_(t.expand(v.sizes()));
  }
  return views;
}

std::vector<at::Tensor> broadcastSelect(at::TensorList leaves, int64_t dim, int64_t index,
                                        const std::optional<std::string>& layout) {
  auto shape = broadcastShape(leaves);
  const int64_t R = static_cast<int64_t>(shape.size());
  const int64_t d = at::maybe_wrap_dim(dim, R);
  const int64_t S = shape[d];
  TORCH_CHECK_INDEX(index >= -S && index < S, "select(): index ", index, " out of range for tensor of size ",
                    at::IntArrayRef(shape), " at dimension ", d);
  std::vector<at::Tensor> out;
  for (const auto& leaf : leaves) {
    int64_t ld = leafDim(d, R, leaf);
    if (leaf.dim() == 0 || ld < 0) {
      out.push_back(leaf);
      continue;
    }
    at::Tensor v = leaf.select(ld, leaf.size(ld) == S ? index : 0);
    out.push_back(leaf.dim() == 1 && R >= 2 ? v.unsqueeze(0) : v);  // sink_views proves R >= 2
  }
  return withEagerLayout(std::move(out), leaves, layout, true, [&](const at::Tensor& x) { return x.select(d, index); });
}

std::vector<at::Tensor> broadcastSlice(at::TensorList leaves, int64_t dim, std::optional<int64_t> start,
                                       std::optional<int64_t> end, int64_t step,
                                       const std::optional<std::string>& layout) {
  auto shape = broadcastShape(leaves);
  const int64_t R = static_cast<int64_t>(shape.size());
  const int64_t d = at::maybe_wrap_dim(dim, R);
  const int64_t S = shape[d];
  TORCH_CHECK(step > 0, "slice step must be positive");
  std::vector<at::Tensor> out;
  for (const auto& leaf : leaves) {
    int64_t ld = leafDim(d, R, leaf);
    if (leaf.dim() == 0 || ld < 0 || leaf.size(ld) != S) {
      out.push_back(leaf);
      continue;
    }
    out.push_back(leaf.slice(ld, start, end, step));
  }
  return withEagerLayout(std::move(out), leaves, layout, step == 1,
                         [&](const at::Tensor& x) { return x.slice(d, start, end, step); });
}

std::vector<at::Tensor> broadcastUnsqueeze(at::TensorList leaves, int64_t dim,
                                           const std::optional<std::string>& layout) {
  auto shape = broadcastShape(leaves);
  const int64_t R = static_cast<int64_t>(shape.size());
  const int64_t d = at::maybe_wrap_dim(dim, R + 1);
  std::vector<at::Tensor> out;
  for (const auto& leaf : leaves) {
    int64_t ld = leafDim(d, R, leaf);
    // All leaves 0-dim (R == 0): each becomes [1], so all stay alike for type promotion.
    if (R == 0)
      out.push_back(leaf.unsqueeze(0));
    else
      out.push_back(leaf.dim() == 0 || ld < 0 ? leaf : leaf.unsqueeze(ld));
  }
  return withEagerLayout(std::move(out), leaves, layout, true, [&](const at::Tensor& x) { return x.unsqueeze(d); });
}

// X.squeeze(dim): where X's size at dim is 1, each leaf reaching dim loses it (its size there is
// 1 too); elsewhere the squeeze leaves X as it is, and the leaves with it. A 1-D leaf keeps a [1]
// (as select's): a 0-dim one would take part in type promotion with a lower priority
// (sink_views proves X's rank >= 2).
std::vector<at::Tensor> broadcastSqueeze(at::TensorList leaves, int64_t dim, const std::optional<std::string>& layout) {
  auto shape = broadcastShape(leaves);
  const int64_t R = static_cast<int64_t>(shape.size());
  const int64_t d = at::maybe_wrap_dim(dim, R);
  if (R == 0 || shape[d] != 1) return std::vector<at::Tensor>(leaves.begin(), leaves.end());
  std::vector<at::Tensor> out;
  for (const auto& leaf : leaves) {
    const int64_t ld = leafDim(d, R, leaf);
    if (leaf.dim() == 0 || ld < 0)
      out.push_back(leaf);
    else
      out.push_back(leaf.dim() == 1 ? leaf : leaf.squeeze(ld));
  }
  return withEagerLayout(std::move(out), leaves, layout, true, [&](const at::Tensor& x) { return x.squeeze(d); });
}

// self.repeat(repeats) read only by one fused op (passes/regions/repeats.h): the expanded view where that
// is the same tensor, values and the fused op's output layout alike; else the repeat itself.
// * values: repeat tiles each dim of the padded source [1, ..., 1, *self.shape] reps[i] times;
//   a dim of size 1 tiled N times holds what its expansion to N holds, so when every dim with
//   reps[i] != 1 has size 1 the two agree element for element.
// * layout: the fused op lays its output out as eager would for its operands' strides
//   (TensorIterator's dim order; its insertion sort skips pairs an operand leaves undecided, so
//   the zero strides of a view can let another operand's vote reorder dims the contiguous repeat
//   had fixed). When neither the view nor any other operand of the fused op (`others`) ever asks
//   for a swap, both orders are the identity, as for the contiguous repeat.
// Anything else (a tiled dim of size > 1, fewer repeats than dims, a negative or zero count,
// another layout) runs aten::repeat, which also raises eager's errors.
at::Tensor broadcastRepeat(const at::Tensor& self, at::IntArrayRef repeats, at::TensorList others) {
  const int64_t k = static_cast<int64_t>(repeats.size());
  bool view = k >= self.dim();
  std::vector<int64_t> target(k);
  for (int64_t i = 0; view && i < k; ++i) {
    const int64_t d = i - (k - self.dim());
    const int64_t size = d < 0 ? 1 : self.size(d);
    view = repeats[i] == 1 || (repeats[i] > 0 && size == 1);
    target[i] = size * repeats[i];
  }
  for (const auto& t : others) view = view && neverSwaps(t);
  if (view) {
    at::Tensor v = self.expand(target);
    if (neverSwaps(v)) return v;
  }
  return self.repeat(repeats);
}

}  // namespace
}  // namespace tsfuse

TORCH_LIBRARY_FRAGMENT(tsfuse, m) {
  // `layout`: the elementwise expression the leaves feed (sink_views); absent in graphs saved
  // before it existed, which keep the views as they are.
  m.def("broadcast_select(Tensor[] leaves, int dim, int index, str? layout=None) -> Tensor[]", tsfuse::broadcastSelect);
  m.def(
      "broadcast_slice(Tensor[] leaves, int dim=0, int? start=None, int? end=None, int step=1, str? layout=None) "
      "-> Tensor[]",
      tsfuse::broadcastSlice);
  m.def("broadcast_unsqueeze(Tensor[] leaves, int dim, str? layout=None) -> Tensor[]", tsfuse::broadcastUnsqueeze);
  m.def("broadcast_squeeze(Tensor[] leaves, int dim, str? layout=None) -> Tensor[]", tsfuse::broadcastSqueeze);
  // The result may be a view of self (the alias annotation says so) or a fresh repeat.
  m.def("broadcast_repeat(Tensor(a) self, int[] repeats, Tensor[] others) -> Tensor(a)", tsfuse::broadcastRepeat);
}
