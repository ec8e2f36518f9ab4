#include "passes/analysis/shape_facts.h"

#include "passes/analysis/broadcast_views.h"
#include "passes/analysis/op_table.h"

#include "kernels/runtime/full_slice.h"
#include "kernels/ir/op_registry.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <vector>

namespace tsfuse {
namespace {

using torch::jit::Node;
using torch::jit::toIValue;
using torch::jit::Value;

constexpr int kMaxDepth = 64;  // expression trees of real code are far shallower

// x.to(torch.bool) (x.bool(), traced), the dtype a constant.
bool castToBool(Node* p) {
  if (p->kind() != c10::aten::to || !p->maybeSchema() || !p->schema().argumentIndexWithName("dtype")) return false;
  const std::optional<c10::IValue> d = toIValue(p->namedInput("dtype"));
  return d && d->isInt() && d->toInt() == static_cast<int64_t>(c10::ScalarType::Bool);
}

bool boolAt(Value* v, int depth) {
  if (depth > kMaxDepth) return false;
  Node* p = v->node();
  if (castToBool(p)) return true;
  if (keepsDtype(p)) return boolAt(p->input(0), depth + 1);
  if (Node* views = broadcastViews(p)) {  // sink_views' view of the list's element at v's offset
    Node* list = views->input(0)->node();
    const size_t i = v->offset();
    return list->kind() == c10::prim::ListConstruct && i < list->inputs().size() && boolAt(list->input(i), depth + 1);
  }
  ElementwiseMatch m;
  if (!matchElementwise(v->node(), m, nullptr)) return false;
  const OpDef& def = opDef(m.op);
  if (def.has(kCompare) || def.has(kLogical)) return true;
  bool bitwise = m.op == Op::BitwiseAnd || m.op == Op::BitwiseOr || m.op == Op::BitwiseXor || m.op == Op::BitwiseNot;
  // On two bools (or one, for ~) the bitwise ops return bool; a number operand could promote.
  return bitwise && std::all_of(m.args.begin(), m.args.end(),
                                [&](const MatchedArg& a) { return a.tensor && boolAt(a.tensor, depth + 1); });
}

bool leavesWithin(Value* v, const std::vector<Value*>& twins, int depth) {
  if (std::find(twins.begin(), twins.end(), v) != twins.end()) return true;
  ElementwiseMatch m;
  if (depth > kMaxDepth || v->node()->kind() == c10::aten::masked_fill || !matchElementwise(v->node(), m, nullptr))
    return false;
  // The result has its tensor arguments' common layout; numbers add none.
  return std::all_of(m.args.begin(), m.args.end(),
                     [&](const MatchedArg& a) { return !a.tensor || leavesWithin(a.tensor, twins, depth + 1); });
}

// The values known to have x's layout (see provablySameLayout).
std::vector<Value*> layoutTwins(Value* x, int depth) {
  std::vector<Value*> twins{x};
  Node* p = x->node();
  if (isMinMaxDim(p)) {
    twins.push_back(p->output(0) == x ? p->output(1) : p->output(0));
  } else if (isWhereScalarSelf(p) && depth < kMaxDepth) {
    // where(m, c, x0) is laid out as x0 when m is
    std::vector<Value*> inner = layoutTwins(p->input(2), depth + 1);
    if (leavesWithin(p->input(0), inner, 0)) twins.insert(twins.end(), inner.begin(), inner.end());
  }
  return twins;
}

// The least rank a constant dim argument implies (0 when it is not a constant int, or when
// `scalarOk` and the op accepts it on a 0-dim tensor, as it does dims 0 and -1).
int64_t dimRank(Value* d, bool scalarOk = false) {
  auto iv = toIValue(d);
  if (!iv || !iv->isInt() || (scalarOk && (iv->toInt() == 0 || iv->toInt() == -1))) return 0;
  return rankFor(iv->toInt());
}

// The length of an int[] argument built by prim::ListConstruct or a constant.
std::optional<int64_t> listLength(Value* l) {
  if (l->node()->kind() == c10::prim::ListConstruct) return static_cast<int64_t>(l->node()->inputs().size());
  if (auto iv = toIValue(l); iv && iv->isIntList()) return static_cast<int64_t>(iv->toIntList().size());
  return std::nullopt;
}

}  // namespace

ViewKind viewKind(Node* n) {
  if (n->kind() != c10::aten::select && n->kind() != c10::aten::slice && n->kind() != c10::aten::unsqueeze &&
      n->kind() != c10::aten::squeeze)
    return ViewKind::None;
  const c10::FunctionSchema* s = n->maybeSchema();
  if (!s) return ViewKind::None;
  ViewKind k = ViewKind::None;
  if (n->kind() == c10::aten::select && s->overload_name() == "int")
    k = ViewKind::Select;
  else if (n->kind() == c10::aten::slice && s->overload_name() == "Tensor")
    k = ViewKind::Slice;
  else if (n->kind() == c10::aten::unsqueeze && s->overload_name().empty())
    k = ViewKind::Unsqueeze;
  else if (n->kind() == c10::aten::squeeze && s->overload_name() == "dim")
    k = ViewKind::Squeeze;
  if (k == ViewKind::None) return k;
  for (size_t i = 1; i < n->inputs().size(); ++i)
    if (!toIValue(n->input(i))) return ViewKind::None;
  return k;
}

int64_t RankBounds::bound(Value* v, int depth) {
  if (auto t = v->type()->cast<c10::TensorType>(); t && t->dim()) return static_cast<int64_t>(*t->dim());
  if (auto it = known_.find(v); it != known_.end()) return it->second;
  if (depth > kMaxDepth) return 0;
  Node* p = v->node();
  int64_t r = 0;
  ElementwiseMatch m;
  auto dim = [&] { return rankFor(toIValue(p->input(1))->toInt()); };
  if (auto other = otherView(p, depth)) {
    r = *other;
  } else {
    switch (viewKind(p)) {
      case ViewKind::Unsqueeze:
        r = std::max(bound(p->input(0), depth + 1) + 1, dim());
        break;
      case ViewKind::Select:
        r = std::max(bound(p->input(0), depth + 1), dim()) - 1;
        break;
      case ViewKind::Slice:
        r = std::max(bound(p->input(0), depth + 1), dim());
        break;
      case ViewKind::Squeeze:  // one dim fewer where it has size 1 (a 0-dim tensor takes dim 0 or -1)
        r = std::max<int64_t>(bound(p->input(0), depth + 1) - 1, 0);
        break;
      case ViewKind::None:  // an elementwise result has its operands' largest rank
        if (matchElementwise(p, m, nullptr))
          for (const MatchedArg& a : m.args)
            if (a.tensor) r = std::max(r, bound(a.tensor, depth + 1));
        break;
    }
  }
  known_[v] = r;
  return r;
}

// The bound of p's tensor output for the ops viewKind does not cover: list elements of
// chunk/split/unbind (unpacked or indexed), stack and cat, and rank-keeping or rank-fixing views.
std::optional<int64_t> RankBounds::otherView(Node* p, int depth) {
  using namespace c10;
  if (p->kind() == prim::ListUnpack || p->kind() == aten::__getitem__) {
    if (p->kind() == aten::__getitem__ && p->outputs().size() != 1) return std::nullopt;
    return splitElement(p->input(0)->node(), depth);
  }
  auto self = [&] { return bound(p->input(0), depth + 1); };
  // chunk with its pieces unpacked, as the executor's CanonicalizeOps writes it before the
  // load-time pass runs: every piece keeps the input's rank
  if (p->kind() == prim::ConstantChunk) return std::max(self(), rankFor(p->i(attr::dim)));
  static const Symbol fullSlice = Symbol::fromQualString(kFullSliceOp);
  if (p->kind() == fullSlice) return std::max(self(), dimRank(p->input(1)));
  const FunctionSchema* s = p->maybeSchema();
  if (s && (p->kind() == aten::stack || p->kind() == aten::cat) && s->overload_name().empty() &&
      p->input(0)->node()->kind() == prim::ListConstruct) {  // pieces of one rank (a cat's: >= 1)
    int64_t r = 0;
    for (Value* piece : p->input(0)->node()->inputs()) r = std::max(r, bound(piece, depth + 1));
    return std::max(p->kind() == aten::stack ? r + 1 : r, dimRank(p->input(1)));
  }
  if (!s || p->inputs().empty() || !p->input(0)->type()->isSubtypeOf(*TensorType::get())) return std::nullopt;
  const std::string& o = s->overload_name();
  if (p->kind() == aten::transpose && o == "int")  // a 0-dim tensor accepts dims 0 and -1
    return std::max({self(), dimRank(p->input(1), true), dimRank(p->input(2), true)});
  if ((p->kind() == aten::t || p->kind() == aten::contiguous || p->kind() == aten::clone ||
       p->kind() == aten::detach) &&
      o.empty())
    return self();
  if ((p->kind() == aten::permute || p->kind() == aten::view || p->kind() == aten::reshape) && o.empty())
    return listLength(p->input(1));  // the rank is the list's length
  if ((p->kind() == aten::expand || p->kind() == aten::repeat) && o.empty()) {
    auto n = listLength(p->input(1));
    return n ? std::max(*n, self()) : self();
  }
  return reduced(p, *s, depth);
}

// The bound of a reduction's outputs: an op with `dim` and `keepdim` arguments (sum, mean, amax,
// max.dim, argmin, logsumexp, var, norm, ...) keeps its input's rank or drops one per reduced dim.
// A 0-dim input accepts dims 0 and -1.
std::optional<int64_t> RankBounds::reduced(Node* p, const c10::FunctionSchema& s, int depth) {
  const std::optional<int> dimAt = s.argumentIndexWithName("dim"), keepAt = s.argumentIndexWithName("keepdim");
  if (!dimAt || !keepAt || static_cast<size_t>(std::max(*dimAt, *keepAt)) >= p->inputs().size()) return std::nullopt;
  const std::optional<c10::IValue> dims = toIValue(p->input(*dimAt)), keep = toIValue(p->input(*keepAt));
  if (!dims || !keep || !keep->isBool()) return std::nullopt;
  std::vector<int64_t> reduced;
  if (dims->isInt())
    reduced = {dims->toInt()};
  else if (dims->isIntList())
    reduced = dims->toIntVector();
  else
    return std::nullopt;  // None: every dim, or an op that reads it otherwise
  int64_t in = bound(p->input(0), depth + 1);
  for (int64_t d : reduced)
    if (d != 0 && d != -1) in = std::max(in, rankFor(d));
  if (keep->toBool()) return in;
  if (reduced.empty()) return 0;  // sum(x, []) reduces every dim
  return std::max<int64_t>(in - static_cast<int64_t>(reduced.size()), 0);
}

// The bound of each tensor of the list `list` makes (chunk/split/unbind of a tensor).
std::optional<int64_t> RankBounds::splitElement(Node* list, int depth) {
  using namespace c10;
  const FunctionSchema* s = list->maybeSchema();
  if (!s || list->inputs().size() < 2 || !list->input(0)->type()->isSubtypeOf(*TensorType::get())) return std::nullopt;
  for (const auto& use : list->output()->uses())  // a list mutated later could hold other tensors
    if (use.user->kind() != prim::ListUnpack && use.user->kind() != aten::__getitem__) return std::nullopt;
  const bool unbind = list->kind() == aten::unbind && s->overload_name() == "int";
  const bool keeps = list->kind() == aten::chunk || list->kind() == aten::split ||
                     list->kind() == aten::split_with_sizes || list->kind() == aten::tensor_split ||
                     list->kind() == aten::unsafe_chunk || list->kind() == aten::unsafe_split;
  if (!unbind && !keeps) return std::nullopt;
  Value* dim = list->inputs().back();  // every such overload ends with `int dim`
  int64_t r = std::max(bound(list->input(0), depth + 1), dimRank(dim));
  return unbind ? std::max<int64_t>(r - 1, 0) : r;
}

bool isMinMaxDim(Node* n) {
  if (n->kind() != c10::aten::max && n->kind() != c10::aten::min) return false;
  const c10::FunctionSchema* s = n->maybeSchema();
  return s && s->overload_name() == "dim" && n->outputs().size() == 2;
}

bool isWhereScalarSelf(Node* n) {
  if (n->kind() != c10::aten::where) return false;
  const c10::FunctionSchema* s = n->maybeSchema();
  return s && s->overload_name() == "ScalarSelf";
}

bool keepsDtype(Node* p) {
  using namespace c10;
  static const Symbol kinds[] = {aten::select, aten::slice,      aten::unsqueeze, aten::squeeze,
                                 aten::expand, aten::expand_as,  aten::permute,   aten::transpose,
                                 aten::t,      aten::reshape,    aten::view,      aten::flatten,
                                 aten::repeat, aten::contiguous, aten::clone,     aten::detach};
  if (std::find(std::begin(kinds), std::end(kinds), p->kind()) == std::end(kinds) || p->outputs().size() != 1 ||
      p->inputs().empty() || !p->input(0)->type()->cast<c10::TensorType>())
    return false;
  const c10::FunctionSchema* s = p->maybeSchema();  // (view(dtype) reinterprets the bytes)
  return p->kind() != aten::view || (s && s->overload_name().empty());
}

bool isExpand(const Node* n) {
  return n->kind() == c10::aten::expand || n->kind() == c10::aten::expand_as || n->kind() == c10::aten::broadcast_to;
}

bool provablyBool(Value* v) { return boolAt(v, 0); }

bool provablySameLayout(Value* v, Value* x) { return leavesWithin(v, layoutTwins(x, 0), 0); }

std::optional<int64_t> exactRank(Value* x) {
  if (auto t = x->type()->cast<c10::TensorType>(); t && t->dim()) return static_cast<int64_t>(*t->dim());
  using namespace c10;
  static const Symbol indexMask = Symbol::fromQualString("tsfuse::index_mask");
  Node* q = x->node();
  if (q->kind() == indexMask) return exactRank(q->input(1));  // (it raises for another rank)
  if (q->kind() == aten::index_put_ && q->outputs().size() == 1) return exactRank(q->input(0));  // (x itself)
  if ((q->kind() == aten::tensor || q->kind() == aten::scalar_tensor) && !q->inputs().empty() &&
      q->input(0)->type()->kind() != TypeKind::ListType)
    return 0;  // a tensor of one number
  ElementwiseMatch m;
  if (matchElementwise(q, m, nullptr)) {  // its tensor operands' largest rank, where each is known
    std::optional<int64_t> r;
    for (const MatchedArg& a : m.args) {
      if (!a.tensor) continue;
      auto ar = exactRank(a.tensor);
      if (!ar) return std::nullopt;
      r = std::max(r.value_or(0), *ar);
    }
    return r;
  }
  // The sizes' list: a view's or repeat's second argument, a factory's first.
  static const Symbol views[] = {aten::expand, aten::reshape, aten::view, aten::repeat};
  static const Symbol factories[] = {aten::zeros, aten::ones, aten::empty, aten::full};
  const bool view = std::find(std::begin(views), std::end(views), q->kind()) != std::end(views);
  const bool factory = std::find(std::begin(factories), std::end(factories), q->kind()) != std::end(factories);
  const size_t at = view ? 1 : 0;
  if ((!view && !factory) || q->outputs().size() != 1 || q->inputs().size() <= at ||
      !q->input(at)->type()->isSubtypeOf(*ListType::ofInts()))
    return std::nullopt;
  return listLength(q->input(at));
}

}  // namespace tsfuse
