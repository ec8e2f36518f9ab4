#include "passes/canonicalize.h"

#include "passes/framework/driver.h"
#include "passes/zero_dim_numbers.h"
#include "passes/analysis/decompositions.h"
#include "passes/analysis/fill_values.h"
#include "passes/analysis/grad_scope.h"
#include "passes/analysis/op_table.h"
#include "passes/analysis/shape_facts.h"

#include "kernels/ir/op_registry.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/common_subexpression_elimination.h>
#include <torch/csrc/jit/passes/constant_propagation.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <unordered_set>

namespace tsfuse {
namespace {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::toIValue;

bool isIntConstant(Value* v, int64_t want) {
  auto iv = toIValue(v);
  return iv && iv->isInt() && iv->toInt() == want;
}

const c10::Symbol kInplaceResult = c10::Symbol::fromQualString("tsfuse::inplace_result");
const c10::Symbol kIndexMask = c10::Symbol::fromQualString("tsfuse::index_mask");

// Whether `n`'s output is a tensor no one else holds when it is made: a new tensor from an
// elementwise op or a reduction (isFreshReader), a factory, a clone, a matrix product or cdist
// (their results never alias an input, so a distance's tail `d.clamp_min_(0).div_(l).exp_()` over
// a matmul fuses), or inplace_result over such a value that nothing else reads (it returns that
// value itself or a conversion of it).
bool freshTensor(Node* n) {
  static const std::unordered_set<c10::Symbol> newTensors = {
      c10::aten::zeros,     c10::aten::ones,      c10::aten::full,       c10::aten::empty,     c10::aten::zeros_like,
      c10::aten::ones_like, c10::aten::full_like, c10::aten::empty_like, c10::aten::new_zeros, c10::aten::new_ones,
      c10::aten::new_full,  c10::aten::new_empty, c10::aten::clone,      c10::aten::matmul,    c10::aten::mm,
      c10::aten::bmm,       c10::aten::addmm,     c10::aten::baddbmm,    c10::aten::cdist,     c10::aten::linear,
      c10::aten::repeat};
  if (newTensors.count(n->kind())) return n->outputs().size() == 1;
  // inplace_result, and a cast that may return its input itself (x.to(x.dtype) is x): fresh where
  // that input is fresh and read by nothing else, so a write to one is seen by nobody else.
  ElementwiseMatch m;
  if (n->kind() == kInplaceResult || (matchElementwise(n, m, nullptr) && opDef(m.op).has(kMayAlias)))
    return n->input(0)->uses().size() == 1 && n->input(0)->node()->owningBlock() == n->owningBlock() &&
           freshTensor(n->input(0)->node());
  return !isMetadataRead(n) && isFreshReader(n);
}

// TupleUnpack(TupleConstruct(a, b)) -> a, b (inlined helpers returning tuples). Tuples are
// immutable, so this is exact. NB: torch's LowerSimpleTuples is not used: its clean-up dropped
// an in-place op on a tensor held by a returned list (see CanonicalizeIR tests).
bool forwardTuples(Block* block) {
  bool any = false;
  for (Node* n : block->nodes()) {
    for (Block* sub : n->blocks()) any |= forwardTuples(sub);
    if (n->kind() != c10::prim::TupleUnpack || n->input()->node()->kind() != c10::prim::TupleConstruct) continue;
    Node* tuple = n->input()->node();
    if (tuple->inputs().size() != n->outputs().size()) continue;
    for (size_t i = 0; i < n->outputs().size(); ++i) n->output(i)->replaceAllUsesWith(tuple->input(i));
    any = true;
  }
  return any;
}

// The node-by-node rewrites (2-4 of canonicalize.h), each node's nested blocks first.
struct CanonicalizePattern : Pattern {
  MadeFrom madeFrom;  // the value each in-place rewrite made, to the value it was written into

  CanonicalizePattern() : Pattern("canonicalize", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    return tryInPlace(n, rw) || tryBoolMaskFill(n, rw) || tryValuesOnlyMinMax(n, rw) || tryExpandAs(n, rw) ||
           tryMetadataOfCopy(n);
  }

  // x.dtype / x.device of x = a view or copy of y (y.repeat(...): scripted x[mask] = c reads x's
  // for c's tensor) -> y's, so x's only readers may be the fused ops that read it as a broadcast.
  static bool tryMetadataOfCopy(Node* n) {
    if ((n->kind() != c10::prim::dtype && n->kind() != c10::prim::device) || n->inputs().size() != 1) return false;
    Node* p = n->input(0)->node();
    if (!keepsDtype(p)) return false;
    n->replaceInput(0, p->input(0));  // no event: the same dtype and device
    return true;
  }

  // x.expand_as(y) -> x.expand(y.size()), which is how ATen computes it (values, view, errors):
  // y is read for its sizes alone, as a metadata reader whose stand-in leaves y unstored (ssd's
  // `area_a.unsqueeze(1).expand_as(inter)` beside `inter / union`, inter a reduction's value).
  static bool tryExpandAs(Node* n, Rewriter& rw) {
    if (n->kind() != c10::aten::expand_as || n->inputs().size() != 2) return false;
    Graph& graph = rw.graph();
    torch::jit::WithInsertPoint guard(n);
    Value* sizes = graph.insert(c10::aten::size, {n->input(1)}, {}, n->sourceRange());
    Value* expanded = graph.insert(c10::aten::expand, {n->input(0), sizes}, {}, n->sourceRange());
    expanded->setType(n->output()->type());
    rw.replaceAllUsesWith(n->output(), expanded);
    rw.erase(n);  // no event: the computation is unchanged
    return true;
  }

  // Out of place, a write nothing reads would be a dead pure op, which TorchScript drops with the
  // error eager's write raises (a tensor of another device or shape).
  static bool unreadWrite(Node* n) { return !n->output()->hasUses() && !readAfter(n->input(0), n); }

  // Why the write `n` to x (its input 0) cannot become a new value, or "": x must be a fresh
  // result of n's block (nothing else holds it) made in n's autograd mode.
  static std::string freshTarget(Node* n) {
    Value* x = n->input(0);
    Node* producer = x->node();
    if (producer->owningBlock() != n->owningBlock() || !freshTensor(producer))
      return "%" + x->debugName() +
             " is not a fresh result in the same block (an input, a view, or a value from another block may be "
             "visible elsewhere)";
    if (std::string scope = gradScopeBoundary(producer, n, /*strict=*/true); !scope.empty())
      return "%" + x->debugName() + "'s producer and the write: " + scope;
    return "";
  }

  // Why x.op_(args) and x.op(args) could differ in dtype or shape, or "". The in-place form keeps
  // x's dtype and shape (or raises); the functional one promotes and broadcasts. They agree when
  // every other argument is a constant scalar and the promotion cannot change x's dtype: with a
  // float scalar or a float-valued op, x must be floating (its producer always returns floats);
  // with int scalars, x must not be bool (its producer never returns bool).
  static std::string dtypeHazard(const ElementwiseMatch& fm, Op producer) {
    const OpDef& op = opDef(fm.op);
    const OpDef& made = opDef(producer);
    if (!op.has(kInPlace)) return "its out-of-place form returns another dtype";
    bool floatScalar = op.has(kFloatValued);
    for (size_t i = 1; i < fm.args.size(); ++i) {
      const MatchedArg& a = fm.args[i];
      if (a.tensor) return "a tensor argument could change the result's dtype or shape";
      // A number known only at run time promotes as a constant of its type would.
      const c10::TypeKind number = a.number ? a.number->type()->kind() : c10::TypeKind::AnyType;
      if (a.constant.kind == Arg::Kind::Float || number == c10::TypeKind::FloatType)
        floatScalar = true;
      else if (a.constant.kind == Arg::Kind::Bool || number == c10::TypeKind::BoolType)
        return "a bool argument could change the result's dtype";
    }
    if (floatScalar && !made.has(kFloatValued))
      return "the mutated value may be an integer tensor (the out-of-place result would be float)";
    if (!made.has(kNeverBool)) return "the mutated value may be a bool tensor (promotion could change its dtype)";
    return "";
  }

  // x.op_(args) -> y = x.op(args), or y = tsfuse::inplace_result(x.op(args), x); uses of the
  // result and later uses of x -> y
  // NB: the rewrite is exact only if no one but the uses we rename can see x's memory: x must be
  // a fresh tensor made in n's block (freshTensor: not an input, not a view or alias of
  // anything), and every use of x before n must be a fresh reader (an elementwise op or a
  // reduction: it cannot create an alias that would observe the write later). Uses after n
  // (views, returns, other in-place ops) see y instead, which holds what x would have held. The
  // functional form alone holds it when it provably keeps x's dtype and shape (dtypeHazard);
  // otherwise inplace_result converts it to x's dtype and layout or raises the in-place op's
  // error (arguments that broadcast beyond x, a result x's dtype cannot hold), and fuses on.
  bool tryInPlace(Node* n, Rewriter& rw) {
    if (!isInPlaceAtenOp(n) || n->outputs().size() != 1) return false;
    const std::string name = n->kind().toUnqualString();
    Value* x = n->input(0);
    const bool unread = unreadWrite(n);  // (asked before `functional` reads x)
    // The functional form must exist and be fusible, or the rewrite buys nothing.
    // (or a decomposition's that keeps x's dtype and shape: triu_, x's layout by inplace_result)
    Node* functional = rw.graph().create(c10::Symbol::aten(outOfPlaceName(name)), n->inputs(), 1);
    ElementwiseMatch fm;
    const bool fusible = matchElementwise(functional, fm, nullptr);
    const Decomposition* d = fusible ? nullptr : decompositionOf(functional);
    if (!fusible && !(d && d->keepsSelf)) {
      rw.erase(functional);
      return false;
    }
    auto reject = [&](const std::string& why) {
      rw.erase(functional);
      return rw.notifyMatchFailure({n}, "in-place " + std::string(n->kind().toQualString()) + " kept: " + why);
    };
    if (std::string why = freshTarget(n); !why.empty()) return reject(why);
    std::string why = writeObserver(n, x, functional);
    if (!why.empty()) return reject(why);
    if (unread) return reject("nothing reads what it writes");
    functional->insertBefore(n);
    functional->setSourceRange(n->sourceRange());
    ElementwiseMatch pm;
    // (a decomposition's result, triu's, is laid out anew: inplace_result keeps x's layout)
    const bool keepsDtypeAndShape = !d && matchElementwise(x->node(), pm, nullptr) && !opDef(pm.op).has(kMayAlias) &&
                                    dtypeHazard(fm, pm.op).empty();
    Node* result = functional;
    if (!keepsDtypeAndShape) {
      result = rw.graph().create(kInplaceResult, {functional->output(), x}, 1);
      result->insertAfter(functional);
    }
    return replaceWrite(n, result, std::string("in-place ") + n->kind().toQualString() + " on a fresh tensor", rw);
  }

  // In-place `n` writing x -> `result` (inserted before n), computing
  // what x holds after it: n's result and the uses of x after n read result's value instead.
  bool replaceWrite(Node* n, Node* result, const std::string& what, Rewriter& rw) {
    Value* x = n->input(0);
    Value* y = result->output();
    y->setType(n->output()->type());
    result->setSourceRange(n->sourceRange());
    n->output()->replaceAllUsesWith(y);
    x->replaceAllUsesAfterNodeWith(n, y);
    // An in-place op keeps x's dtype and device: their readers read x's (the next scripted
    // x[mask] = c builds its value from them), so y's values alone are read.
    std::vector<Node*> metadata;
    for (const auto& use : y->uses())
      if (use.user->kind() == c10::prim::dtype || use.user->kind() == c10::prim::device) metadata.push_back(use.user);
    for (Node* m : metadata) m->replaceInput(0, x);
    madeFrom[y] = x;
    RewriteEvent e;
    e.add(n);
    e.fusedOp = result->kind().toQualString();
    e.reason = what + " -> " + e.fusedOp;
    rw.notifyRewrite(std::move(e), result);
    rw.erase(n);
    return true;
  }

  // Who could observe the write of in-place `n` to x other than the uses after it, or "": a use
  // before n that may alias x (anything but a fresh reader). `pending` is a node built for the
  // rewrite and not inserted yet.
  // NB: the callers have proven x a fresh result (freshTensor), so
  // nothing held x before it was made: a graph input, a list or an object can reach x only
  // through one of its uses, and a use before n that is not a fresh reader is refused here. No
  // alias database is needed (building one per rewrite cost more than the rest of the pass).
  static std::string writeObserver(Node* n, Value* x, Node* pending) {
    for (const auto& use : x->uses()) {
      if (use.user == n || use.user == pending) continue;
      Node* at = ancestorIn(use.user, n->owningBlock());
      if (at && at->isAfter(n)) continue;
      if (!isFreshReader(use.user))
        return "%" + x->debugName() + " is used before the write by " + describeNode(use.user) + ", which may alias it";
    }
    return "";
  }

  // The tensors x is computed from by elementwise ops, whose largest rank is x's; nullopt where
  // they are many.
  static std::optional<std::vector<Value*>> elementwiseLeaves(Value* x) {
    constexpr size_t kMaxLeaves = 8, kMaxVisited = 64;
    std::vector<Value*> leaves, pending = {x};
    std::unordered_set<Value*> seen;
    while (!pending.empty()) {
      Value* v = pending.back();
      pending.pop_back();
      if (!seen.insert(v).second) continue;
      ElementwiseMatch m;
      if (v->node()->outputs().size() == 1 && matchElementwise(v->node(), m, nullptr)) {
        for (auto a = m.args.rbegin(); a != m.args.rend(); ++a)  // (popped in argument order)
          if (a->tensor) pending.push_back(a->tensor);
      } else {
        leaves.push_back(v);
      }
      if (leaves.size() > kMaxLeaves || seen.size() > kMaxVisited) return std::nullopt;
    }
    return leaves;
  }

  // index_put_'s error for a 0-dim x, which where() does not raise, from the ranks of the tensors
  // x is computed from elementwise (reading theirs, not x's, leaves x fusible):
  //   %r = aten::add(aten::dim(%l0), aten::dim(%l1)); prim::If(aten::eq(%r, 0)) { prim::RaiseException }
  static void insertZeroDimIndexError(Graph& graph, const std::vector<Value*>& leaves) {
    Value* rank = nullptr;
    for (Value* l : leaves) {
      Value* r = graph.insert(c10::aten::dim, {l});
      rank = rank ? graph.insert(c10::aten::add, {rank, r}) : r;
    }
    Value* zeroDim = graph.insert(c10::aten::eq, {rank, graph.insertConstant(int64_t{0})});
    Node* branch = graph.insertNode(graph.create(c10::prim::If, {zeroDim}, 0));
    torch::jit::Block* raise = branch->addBlock();
    branch->addBlock();
    torch::jit::WithInsertPoint inside(raise);
    graph.insert(c10::prim::RaiseException,
                 {graph.insertConstant(std::string("too many indices for tensor of dimension 0 (got 1)")),
                  graph.insertConstant(c10::IValue())});
  }

  // x[mask] = c, i.e. index_put_(x, [mask], <c as a 0-dim tensor>, False)  ->  y = where(mask, c, x),
  // later uses of x -> y
  // NB: exact when mask is bool with exactly x's layout: both then hold c, converted to x's
  // dtype, where mask holds, and x elsewhere, laid out as x (where is a TensorIterator op over
  // two operands of one layout; masked_fill would return a contiguous clone). index_put_ raises
  // for another mask shape, where either would broadcast, so the layout is proven
  // (shape_facts.h), and the conversion of c must not depend on which op converts it
  // (convertsAlike). x must be fresh, as for in-place ops.
  // Where mask's layout is not proven x's, the mask is index_mask(mask, x), which raises
  // index_put_'s errors for other sizes, exact when mask has x's rank and y's strides, which may
  // differ from x's, are read by nothing whose result they change (checkedMaskHazard).
  // The value where() writes: c where it converts as index_put_ would, else scripting's 0-dim
  // tensor of x's dtype itself; in the checked form a traced constant of another dtype is written
  // by masked_fill(x, mask, c), which converts c as index_put_'s masked_fill_ does.
  bool tryBoolMaskFill(Node* n, Rewriter& rw) {
    if (n->kind() != c10::aten::index_put_) return false;
    const c10::FunctionSchema* schema = n->maybeSchema();
    if (!schema || schema->overload_name() != "") return false;
    Value* x = n->input(0);
    Node* list = n->input(1)->node();
    if (list->kind() != c10::prim::ListConstruct || list->inputs().size() != 1 || n->input(1)->uses().size() != 1 ||
        !list->input(0)->type()->isSubtypeOf(*c10::TensorType::get()))
      return false;  // not x[one tensor] = ...
    Value* mask = list->input(0);
    auto reject = [&](const std::string& why) {
      return rw.notifyMatchFailure({n}, "x[mask] = value kept as index_put_: " + why);
    };
    auto accumulate = toIValue(n->input(3));
    if (!accumulate || !accumulate->isBool() || accumulate->toBool())
      return reject("accumulate is not a constant False");
    if (!provablyBool(mask)) return reject("%" + mask->debugName() + " is not provably a bool tensor");
    const bool checkSizes = !provablySameLayout(mask, x);
    if (checkSizes) {
      if (std::string why = checkedMaskHazard(n, mask, x); !why.empty())
        return reject("%" + mask->debugName() + " is not provably of %" + x->debugName() +
                      "'s shape and strides (index_put_ raises for another shape where where() broadcasts, and "
                      "keeps x's strides), and " +
                      why);
    }
    std::vector<Value*> rankFrom;  // where x's rank is not provably >= 1: the tensors it is read from
    if (RankBounds ranks; ranks.atLeast(x) < 1) {
      auto leaves = elementwiseLeaves(x);
      if (!leaves)
        return reject("%" + x->debugName() +
                      " is not provably of rank >= 1, nor computed elementwise from a few tensors whose ranks "
                      "say (index_put_ raises for a 0-dim tensor)");
      if (std::none_of(leaves->begin(), leaves->end(), [&](Value* l) { return ranks.atLeast(l) >= 1; }))
        rankFrom = *leaves;
    }
    if (std::string why = freshTarget(n); !why.empty()) return reject(why);
    std::string why;
    Value* value = n->input(2);
    const std::optional<c10::Scalar> number = fillNumber(value, x, madeFrom, why);
    const std::optional<c10::Scalar> c = number ? convertsAlike(*number, x, why) : std::nullopt;
    const bool scripted = scriptedValue(value, x, madeFrom), traced = !c && !scripted && number && checkSizes;
    if (!c && !scripted && !traced) return reject(why);
    why = writeObserver(n, x, nullptr);
    if (!why.empty()) return reject(why);
    if (unreadWrite(n)) return reject("nothing reads what it writes");
    Graph& graph = rw.graph();
    torch::jit::WithInsertPoint guard(n);
    if (!rankFrom.empty()) insertZeroDimIndexError(graph, rankFrom);
    if (checkSizes) {
      Node* checked = graph.insertNode(graph.create(kIndexMask, {mask, x}, 1));
      checked->output()->setType(mask->type());
      checked->setSourceRange(n->sourceRange());
      mask = checked->output();
    }
    Node* fill = traced ? graph.create(c10::aten::masked_fill, {x, mask, graph.insertConstant(*number)}, 1)
                        : graph.create(c10::aten::where, {mask, c ? graph.insertConstant(*c) : value, x}, 1);
    graph.insertNode(fill);
    return replaceWrite(n, fill,
                        checkSizes
                            ? "x[mask] = value (index_put_ of a bool mask of x's rank, its sizes checked, read "
                              "only by what x's strides do not change) on a fresh intermediate"
                            : "x[mask] = value (index_put_ of a bool mask of x's layout) on a fresh intermediate",
                        rw);
  }

  // Why x[mask] = c (index_put_ `n`) cannot be where(index_mask(mask, x), c, x), or "": mask must
  // have x's rank (a mask of fewer dims selects whole slices; more raises, as index_mask does),
  // and every later reader of x must read values that x's strides do not change: further
  // writes x[m] = v, extrema along dims, any/all (exact in any order), and metadata (sizes).
  static std::string checkedMaskHazard(Node* n, Value* mask, Value* x) {
    const std::optional<int64_t> rank = exactRank(x);
    if (!rank || *rank < 1) return "the rank of %" + x->debugName() + " is not known";
    if (RankBounds().atLeast(mask) < *rank)
      return "%" + mask->debugName() + " is not provably of its rank (a mask of fewer dims selects whole slices)";
    std::vector<Value*> pending{n->output(), x};  // (x: its uses after n)
    for (size_t k = 0; k < pending.size() && k < 64; ++k)
      for (const auto& use : pending[k]->uses()) {
        Node* u = use.user;
        Node* at = ancestorIn(u, n->owningBlock());
        if (u == n || (pending[k] == x && (!at || !at->isAfter(n)))) continue;
        ReductionMatch r;
        if (isMetadataRead(u) || (matchReduction(u, r, nullptr) && layoutFreeReduction(r.spec.kind))) continue;
        if (u->kind() == c10::aten::index_put_ && use.offset == 0) {
          pending.push_back(u->output());
          continue;
        }
        return describeNode(u) + " reads it, whose result its strides may change";
      }
    return pending.size() < 64 ? "" : "it has too many readers to check";
  }

  // Reductions whose values (and indices) are the same whatever order the elements come in.
  static bool layoutFreeReduction(Reduction r) {
    switch (r) {
      case Reduction::Amax:
      case Reduction::Amin:
      case Reduction::Max:
      case Reduction::Min:
      case Reduction::Argmax:
      case Reduction::Argmin:
      case Reduction::Any:
      case Reduction::All:
        return true;
      default:
        return false;
    }
  }

  // values, indices = max|min(x, dim, keepdim) with indices unused
  //   -> tsfuse::extremum_values(x, dim, keepdim, max): max/min's values, a one-output reduction the
  //   passes fuse as amax/amin (the same values, NaN propagation and empty-dim error) whose gradient
  //   still goes to the one index max/min returns, not split among ties as amax/amin's.
  bool tryValuesOnlyMinMax(Node* n, Rewriter& rw) {
    if (!isMinMaxDim(n) || n->output(1)->hasUses()) return false;
    const bool isMax = n->kind() == c10::aten::max;
    Graph& graph = rw.graph();
    torch::jit::WithInsertPoint guard(n);
    Node* r = graph.insertNode(graph.create(c10::Symbol::fromQualString("tsfuse::extremum_values"),
                                            {n->input(0), n->input(1), n->input(2), graph.insertConstant(isMax)}, 1));
    r->output()->setType(n->output(0)->type());
    r->setSourceRange(n->sourceRange());
    n->output(0)->replaceAllUsesWith(r->output());
    RewriteEvent e;
    e.add(n);
    e.reason = std::string(isMax ? "max" : "min") + "(dim) whose indices are unused -> its values (fused as " +
               (isMax ? "amax" : "amin") + ", the gradient to max/min's index)";
    e.fusedOp = r->kind().toQualString();
    rw.notifyRewrite(std::move(e), r);
    rw.erase(n);
    return true;
  }
};

// Identity slices, in a walk of their own after the rewrites above: the only question here that
// needs the alias database, which this walk builds once and keeps (the in-place rewrites change
// what is written, so interleaved with them it was rebuilt after each).
struct IdentitySlicePattern : Pattern {
  IdentitySlicePattern() : Pattern("canonicalize", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override { return tryIdentitySlice(n, rw); }

  // slice(x, d, None|0, None|INT64_MAX, 1) -> x, when the slice is only read and dropping it drops
  // no error (one that may raise stays; pass full_slice_checks makes it cheaper).
  bool tryIdentitySlice(Node* n, Rewriter& rw) {
    if (!isReadOnlyFullSlice(n, rw.aliasDb(), false) || !raisesNothingOfItsOwn(n, rw.aliasDb())) return false;
    n->output()->replaceAllUsesWith(n->input(0));
    rw.erase(n);       // no event: the computation is unchanged
    rw.keepAliasDb();  // the slice aliased its input: every answer about the rest stands
    return true;
  }

  // The identity slice n = slice(x, d, ...) raises only on a tensor of too low a rank (x[:, None, :]
  // on a 1-D x: "Dimension out of range"). It may go when that cannot happen, x's rank being at
  // least d + 1 by what made x; or when the same error comes anyway: for d = 0 or -1, which only a
  // 0-dim x fails, when every use is a slice (each says "slice() cannot be applied to a 0-dim
  // tensor" first) and nothing with an effect runs between n and them.
  static bool raisesNothingOfItsOwn(Node* n, const torch::jit::AliasDb& aliases) {
    const int64_t d = toIValue(n->input(1))->toInt();
    if (RankBounds().atLeast(n->input(0)) >= rankFor(d)) return true;
    if (rankFor(d) > 1) return false;
    for (const auto& use : n->output()->uses()) {
      Node* u = use.user;
      if (u->kind() != c10::aten::slice || use.offset != 0 || u->owningBlock() != n->owningBlock()) return false;
      for (Node* k = n->next(); k != u; k = k->next())
        if (k->hasSideEffects() || !k->blocks().empty() || aliases.isMutable(k)) return false;
    }
    return true;
  }
};

// A list only tsfuse ops read: a fused op's operands (a donated one is taken only where nothing else
// holds its tensor or memory at run time, kernels/runtime/donation.h).
bool isFusedOperandList(Node* list) {
  if (list->kind() != c10::prim::ListConstruct) return false;
  for (const auto& use : list->output()->uses())
    if (!isTsfuseOp(use.user)) return false;
  return true;
}

}  // namespace

// NB: the slice is the same memory as x; replacing it is exact when nothing writes either and its
// uses only read values (so no identity or aliasing of the slice is observable).
bool isReadOnlyFullSlice(Node* n, const torch::jit::AliasDb& aliases, bool fusedOperands) {
  if (n->kind() != c10::aten::slice || n->inputs().size() != 5) return false;
  if (!n->input(0)->type()->isSubtypeOf(*c10::TensorType::get())) return false;
  auto start = toIValue(n->input(2));
  auto end = toIValue(n->input(3));
  bool fromStart = start && (start->isNone() || (start->isInt() && start->toInt() == 0));
  bool toEnd = end && (end->isNone() || (end->isInt() && end->toInt() == std::numeric_limits<int64_t>::max()));
  if (!fromStart || !toEnd || !isIntConstant(n->input(4), 1) || !toIValue(n->input(1))) return false;
  for (const auto& use : n->output()->uses()) {
    Node* u = use.user;
    bool view = u->kind() == c10::aten::select || u->kind() == c10::aten::slice || u->kind() == c10::aten::unsqueeze;
    if (!(isFreshReader(u) || (view && use.offset == 0) || (fusedOperands && isFusedOperandList(u)))) return false;
  }
  return !aliases.hasWriters(n->output()) && !aliases.hasWriters(n->input(0));
}

namespace {
void collectConstants(Block* block, std::unordered_set<Node*>& out) {
  for (Node* n : block->nodes()) {
    if (n->kind() == c10::prim::Constant) out.insert(n);
    for (Block* sub : n->blocks()) collectConstants(sub, out);
  }
}
}  // namespace

bool Canonicalize(std::shared_ptr<Graph>& graph) {
  bool changed = forwardTuples(graph->block());
  std::unordered_set<Node*> constants;
  collectConstants(graph->block(), constants);
  changed |= torch::jit::ConstantPropagation(graph);
  UnfoldZeroDimOthers(*graph, constants);
  // The executor eliminates common subexpressions before its custom passes run (where the load-time
  // hook fuses); so does this pipeline, so that a function fuses to the same ops both ways.
  changed |= torch::jit::EliminateCommonSubexpression(graph);
  CanonicalizePattern pattern;
  changed |= runPattern(graph, pattern);
  IdentitySlicePattern slices;
  changed |= runPattern(graph, slices);
  if (changed) eraseDeadCode(graph);
  return changed;
}

}  // namespace tsfuse
