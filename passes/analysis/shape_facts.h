// Facts about a tensor value that TorchScript's types do not carry but a rewrite needs, proven
// from how the value was computed. Each answers "provably yes" or "not known"; never a guess.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <cstdint>
#include <optional>
#include <unordered_map>

namespace tsfuse {

// values, indices = aten::max|min(x, dim, keepdim)
bool isMinMaxDim(torch::jit::Node* n);
// aten::where(condition, <number>, other)
bool isWhereScalarSelf(torch::jit::Node* n);

// A view or copy of its first input (select, expand, permute, reshape, repeat, clone, ...): its
// result has that input's dtype and device.
bool keepsDtype(torch::jit::Node* p);

// aten::expand, expand_as or broadcast_to: a view whose broadcast dims a copy of it materialises.
bool isExpand(const torch::jit::Node* n);

// `v` is a bool tensor for every input: a comparison or logical op, a cast to bool, &, |, ^, ~ of
// such values, or a view or copy of one.
bool provablyBool(torch::jit::Value* v);

// `v` has exactly the shape and strides of `x`, a fresh (dense) tensor, for every input: v is x,
// or the result of TensorIterator elementwise ops whose tensor leaves all have x's layout (such
// an op lays its result out as its inputs when they agree). Known to have x's layout: x; the
// other output of the max|min(dim) that made x; and, for x = where(m, c, x0) with m of x0's
// layout, what has x0's. (masked_fill is not such an op: it returns a contiguous clone.)
bool provablySameLayout(torch::jit::Value* v, torch::jit::Value* x);

// `x`'s rank for every input: its type's, the length of the sizes that made it (expand, reshape,
// view, repeat, which raises for fewer repeats than dims, and zeros, ones, full, empty), an
// elementwise op's over operands of known ranks, index_put_'s target's, tsfuse::index_mask's.
std::optional<int64_t> exactRank(torch::jit::Value* x);

// select.int / slice.Tensor / unsqueeze with constant arguments: the views passes move or drop.
enum class ViewKind { None, Select, Slice, Unsqueeze, Squeeze };
ViewKind viewKind(torch::jit::Node* n);

// The least rank a tensor must have for dim `d` to be valid in it.
inline int64_t rankFor(int64_t d) { return d >= 0 ? d + 1 : -d; }

// A lower bound of a tensor value's rank: its type's, or what the ops that made it imply (each of
// them raises on a tensor of lower rank, so a value that exists has at least that rank). 0 when
// nothing is known. Memoised per value: hold one for a walk that creates values, not across
// rewrites that erase the ops a bound came from.
class RankBounds {
 public:
  int64_t atLeast(torch::jit::Value* v) { return bound(v, 0); }
  // A value a rewrite created in place of a view, with the view's bound.
  void remember(torch::jit::Value* v, int64_t rank) { known_[v] = rank; }

 private:
  int64_t bound(torch::jit::Value* v, int depth);
  std::optional<int64_t> otherView(torch::jit::Node* p, int depth);
  std::optional<int64_t> splitElement(torch::jit::Node* list, int depth);
  std::optional<int64_t> reduced(torch::jit::Node* p, const c10::FunctionSchema& s, int depth);

  std::unordered_map<torch::jit::Value*, int64_t> known_;
};

}  // namespace tsfuse
