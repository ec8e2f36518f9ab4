#include "kernels/plan/iteration.h"

#include <algorithm>

namespace tsfuse {

BroadcastView::BroadcastView(const at::Tensor& t, at::IntArrayRef shape, bool bindData)
    : data(bindData ? static_cast<const char*>(t.const_data_ptr()) : nullptr), elemSize(t.element_size()) {
  const at::IntArrayRef sizes = t.sizes(), strides = t.strides();
  const int64_t R = static_cast<int64_t>(shape.size()), r = static_cast<int64_t>(sizes.size());
  stride.assign(R, 0);
  for (int64_t d = 0; d < r; ++d) stride[R - r + d] = sizes[d] == 1 ? 0 : strides[d] * elemSize;
}

SubSpace SubSpace::select(const std::vector<BroadcastView>& views, at::IntArrayRef shape, at::IntArrayRef dims) {
  SubSpace s;
  s.size.reserve(dims.size());
  s.stride.resize(views.size());
  for (auto& st : s.stride) st.reserve(dims.size());
  for (int64_t d : dims) {
    s.size.push_back(shape[d]);
    for (size_t o = 0; o < views.size(); ++o) s.stride[o].push_back(views[o].stride[d]);
  }
  return s;
}

int64_t SubSpace::numel() const {
  int64_t n = 1;
  for (int64_t s : size) n *= s;
  return n;
}

void SubSpace::coalesce() {
  for (size_t j = 0; j + 1 < size.size();) {
    bool mergeable = true;
    for (const auto& st : stride) mergeable &= st[j] == st[j + 1] * size[j + 1];
    if (!mergeable) {
      ++j;
      continue;
    }
    size[j] *= size[j + 1];
    size.erase(size.begin() + j + 1);
    for (auto& st : stride) {
      st[j] = st[j + 1];
      st.erase(st.begin() + j + 1);
    }
  }
}

SubSpace SubSpace::outer() const {
  SubSpace s = *this;
  if (s.size.empty()) return s;
  s.size.pop_back();
  for (auto& st : s.stride) st.pop_back();
  return s;
}

bool SubSpace::constantFor(size_t o) const {
  return std::all_of(stride[o].begin(), stride[o].end(), [](int64_t x) { return x == 0; });
}

bool SubSpace::rowInvariant(size_t o) const {
  return stride[o].empty() || std::all_of(stride[o].begin(), stride[o].end() - 1, [](int64_t x) { return x == 0; });
}

Access SubSpace::access(size_t o, int64_t elemSize) const {
  const int64_t lanes = stride[o].empty() ? 0 : stride[o].back();
  if (lanes == 0) return Access::Uniform;
  if (lanes == elemSize) return Access::InPlace;
  return rowInvariant(o) ? Access::Packed : Access::Gathered;
}

namespace {

// The dims of a tensor of these sizes/strides with more than one index, outermost first in
// memory; false when it is not a dense permutation of its shape.
bool memoryOrder(at::IntArrayRef sizes, at::IntArrayRef strides, DimVector& order) {
  order.clear();
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d)
    if (sizes[d] != 1) order.push_back(d);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return strides[x] > strides[y]; });
  int64_t expect = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (strides[*it] != expect) return false;
    expect *= sizes[*it];
  }
  return true;
}

c10::SmallVector<Access, 16> accessOf(const SubSpace& s, const std::vector<BroadcastView>& views) {
  c10::SmallVector<Access, 16> a(views.size());
  for (size_t o = 0; o < views.size(); ++o) a[o] = s.access(o, views[o].elemSize);
  return a;
}

}  // namespace

IterationPlan IterationPlan::make(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an,
                                  bool bindData) {
  IterationPlan p;
  p.shape.assign(an.shape.begin(), an.shape.end());
  const int64_t R = static_cast<int64_t>(p.shape.size());
  if (R == 0)
    p.unsupported = "0-dim value";
  else if (R > kMaxDims)
    p.unsupported = "rank above 25";
  else if (an.valueShape != an.shape)
    p.unsupported = "expression value is not the operands' broadcast";
  // Nothing to walk (a 0-dim value), or the reduction's dims refer to another shape.
  if (R == 0 || an.valueShape != an.shape) return p;
  if (reduce) {
    const std::vector<int64_t> dims = tsfuse::reducedDims(*reduce, R);
    p.reducedDims.assign(dims.begin(), dims.end());
  }

  if (!memoryOrder(an.outSizes, an.outStrides, p.outOrder)) {
    if (!p.unsupported) p.unsupported = "output layout is not dense";
    return p;
  }
  // The output's dims are the kept dims in order, or all dims where keepdim keeps the reduced ones.
  DimVector outToShape;
  for (int64_t d = 0; d < R; ++d)
    if (!p.isReduced(d) || (reduce && reduce->keepdim)) outToShape.push_back(d);
  for (int64_t d : p.outOrder) p.keptOrder.push_back(outToShape[d]);
  for (int64_t d : p.reducedDims)
    if (p.shape[d] != 1) p.reducedOrder.push_back(d);

  const at::TensorList main = mainOperands(e, operands);
  p.views.reserve(main.size());
  for (const auto& t : main) p.views.emplace_back(t, p.shape, bindData);
  p.kept = SubSpace::select(p.views, p.shape, p.keptOrder);
  p.merged = p.kept;
  p.merged.coalesce();
  p.reduced = SubSpace::select(p.views, p.shape, p.reducedOrder);
  p.reduced.coalesce();
  p.keptAccess = accessOf(p.kept, p.views);
  p.mergedAccess = accessOf(p.merged, p.views);

  if (reduce && reduce->epilogue && an.epilogueKeepsShape) {
    for (const auto& t : epilogueOperands(e, operands)) p.epilogueViews.emplace_back(t, an.outSizes, bindData);
    p.epilogueSpace = SubSpace::select(p.epilogueViews, an.outSizes, p.outOrder);
  }
  return p;
}

bool IterationPlan::isReduced(int64_t d) const { return std::binary_search(reducedDims.begin(), reducedDims.end(), d); }

int64_t IterationPlan::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

IterationPlan IterationPlan::withInnerKeptSwapped() const {
  const size_t kd = kept.size.size();
  TORCH_INTERNAL_ASSERT(kd >= 2 && keptOrder.size() == kd && outOrder.size() == kd,
                        "tsfuse: swapping the innermost kept dims of a plan with fewer than two");
  IterationPlan p = *this;
  auto swapInner = [](auto& v) { std::swap(v[v.size() - 1], v[v.size() - 2]); };
  swapInner(p.keptOrder);
  swapInner(p.outOrder);
  swapInner(p.kept.size);
  for (auto& st : p.kept.stride) swapInner(st);
  p.keptAccess = accessOf(p.kept, p.views);
  if (p.epilogueSpace.size.size() == kd) {
    swapInner(p.epilogueSpace.size);
    for (auto& st : p.epilogueSpace.stride) swapInner(st);
  }
  return p;
}

int64_t IterationPlan::slabDim() const {
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (!isReduced(d) && shape[d] > 1) return d;
  return -1;
}

}  // namespace tsfuse
