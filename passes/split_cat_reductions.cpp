// split_cat_reductions (passes/split_cat_reductions.h): a min or max over a stack's dim becomes an
// elementwise min or max of the pieces (max/min(dim)'s values: tsfuse::max_join/min_join, which
// keep its gradient rule).
//
//   %l = prim::ListConstruct(%p0, %p1, %p2)          %c0 = tsfuse::cat_piece(%p0, %p0, 0, 2, True)
//   %s = aten::stack(%l, 2)                   =>     %c1 = tsfuse::cat_piece(%p1, %p0, 1, 2, True)
//   %m = aten::amin(%s, [2], False)                  %c2 = tsfuse::cat_piece(%p2, %p0, 2, 2, True)
//                                                    %m01 = aten::minimum(%c1, %c0)
//                                                    %m012 = aten::minimum(%c2, %m01)
//                                                    %m = aten::contiguous(%m012, 0)
#include "passes/split_cat_reductions.h"

#include "passes/analysis/op_table.h"
#include "passes/analysis/shape_facts.h"
#include "passes/analysis/symbolic_shapes.h"
#include "passes/framework/driver.h"

#include <torch/csrc/jit/ir/constants.h>

#include <optional>
#include <string>
#include <vector>

namespace tsfuse {
namespace {

using torch::jit::Graph;
using torch::jit::Value;

const c10::Symbol kCatPiece = c10::Symbol::fromQualString("tsfuse::cat_piece");

// Whether dims a and b name the same dim of a tensor of rank `rank` (unknown: only the same int).
bool sameDim(int64_t a, int64_t b, std::optional<size_t> rank) {
  if (a == b) return true;
  if (!rank) return false;
  const auto r = static_cast<int64_t>(*rank);
  if (a < -r || a >= r || b < -r || b >= r) return false;
  return (a + r) % r == (b + r) % r;
}

const c10::Symbol kMaxJoin = c10::Symbol::fromQualString("tsfuse::max_join");
const c10::Symbol kMinJoin = c10::Symbol::fromQualString("tsfuse::min_join");

// amin, amax, max/min(dim)'s values, any or all over one dim d with a constant keepdim
// (matchReduction reads them): the reductions this pass splits, each with the elementwise op that
// joins two pieces (any/all, amin/amax: of bool pieces only).
struct Split {
  c10::Symbol join;
  bool needsBool = false;
  int64_t dim = 0;
  bool keepdim = false;
};
std::optional<Split> splitReduction(Node* n) {
  ReductionMatch r;
  if (!matchReduction(n, r, nullptr) || !r.spec.dims || r.spec.dims->size() != 1) return std::nullopt;
  const int64_t d = r.spec.dims->front();
  switch (r.spec.kind) {
    // max/min(dim)'s values give the gradient to the first piece holding the extremum (max_join);
    // amin/amax split it among the tied pieces by their count, which no join of two carries, so
    // only pieces without a gradient (bool) join there.
    case Reduction::Amin:
      return r.spec.routesGradient ? Split{kMinJoin, false, d, r.spec.keepdim}
                                   : Split{c10::aten::minimum, true, d, r.spec.keepdim};
    case Reduction::Amax:
      return r.spec.routesGradient ? Split{kMaxJoin, false, d, r.spec.keepdim}
                                   : Split{c10::aten::maximum, true, d, r.spec.keepdim};
    case Reduction::Any:
      return Split{c10::aten::logical_or, true, d, r.spec.keepdim};
    case Reduction::All:
      return Split{c10::aten::logical_and, true, d, r.spec.keepdim};
    default:
      return std::nullopt;
  }
}

class SplitCatReductionsPattern : public Pattern {
 public:
  SplitCatReductionsPattern() : Pattern("split_cat_reductions", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    auto split = splitReduction(n);
    if (!split) return false;
    Node* joined = n->input(0)->node();
    const bool stack = joined->kind() == c10::aten::stack;
    if (!stack && joined->kind() != c10::aten::cat) return false;
    const std::vector<Node*> nodes = {joined, n};
    auto reject = [&](const std::string& why) {
      return rw.notifyMatchFailure(nodes, "the reduction over a " + std::string(stack ? "stack" : "cat") +
                                              "'s dim stays a reduction of the stored result: " + why);
    };
    auto joinDim = constantInt(joined->input(1));
    Node* list = joined->input(0)->node();
    if (!joinDim) return reject("its dim is not a constant");
    if (list->kind() != c10::prim::ListConstruct || list->inputs().size() < 2 || list->output()->uses().size() != 1)
      return reject("its pieces are not a list of two or more tensors that only it reads");
    auto rank = joined->output()->type()->expectRef<c10::TensorType>().dim();
    for (const auto& use : joined->output()->uses()) {
      auto other = splitReduction(use.user);
      if (!other || use.offset != 0 || !sameDim(other->dim, *joinDim, rank))
        return reject("the joined tensor is also read by " + describeNode(use.user) + ", so it is stored anyway");
    }
    std::vector<Value*> pieces(list->inputs().begin(), list->inputs().end());
    if (split->needsBool)
      for (Value* p : pieces)
        if (!provablyBool(p))
          return reject("piece %" + p->debugName() +
                        (split->join == c10::aten::minimum || split->join == c10::aten::maximum
                             ? " is not provably bool (amin/amax's gradient splits among tied pieces by their "
                               "count, which an elementwise join cannot carry)"
                             : " is not provably bool (any/all of a uint8 tensor is uint8, not logical_or's bool)"));
    if (!stack) {
      // A piece of size 1 along d: unsqueeze(p, d) of any p (it raises where the dim is invalid).
      for (Value* p : pieces) {
        Node* u = p->node();
        auto ud = u->kind() == c10::aten::unsqueeze ? constantInt(u->input(1)) : std::nullopt;
        if (!ud || *ud != *joinDim)
          return reject("piece %" + p->debugName() +
                        " is not provably of size 1 along the dim (amin over an empty piece raises where a cat "
                        "skips it)");
      }
    }

    Graph& graph = rw.graph();
    torch::jit::WithInsertPoint guard(n);
    std::vector<Value*> checked;
    for (size_t i = 0; i < pieces.size(); ++i) {
      Node* c = graph.insertNode(graph.create(kCatPiece,
                                              {pieces[i], pieces[0], graph.insertConstant(static_cast<int64_t>(i)),
                                               graph.insertConstant(*joinDim), graph.insertConstant(stack)},
                                              1));
      c->output()->setType(pieces[i]->type());
      c->setSourceRange(joined->sourceRange());
      checked.push_back(c->output());
    }
    Value* r = checked[0];
    for (size_t i = 1; i < checked.size(); ++i) {
      // The later piece first: of two equal values (0.0 and -0.0) the fused minimum/maximum return
      // the second operand, so the earlier piece wins, as in eager's amin/amax along a row (and
      // max_join gives the earlier piece the gradient, as max(dim)).
      Node* m = graph.insertNode(graph.create(split->join, {checked[i], r}, 1));
      m->output()->setType(c10::TensorType::get());
      m->setSourceRange(n->sourceRange());
      r = m->output();
    }
    // A reduction's result is dense whatever its input's layout; the joins' follows their operands'.
    Node* dense = graph.insertNode(graph.create(
        c10::aten::contiguous, {r, graph.insertConstant(static_cast<int64_t>(c10::MemoryFormat::Contiguous))}, 1));
    dense->setSourceRange(n->sourceRange());
    dense->output()->setType(c10::TensorType::get());
    r = dense->output();
    // Stack: r has a piece's shape, the reduced one without keepdim. Cat: r has size 1 along d.
    Node* shaped = nullptr;
    if (stack && split->keepdim) shaped = graph.create(c10::aten::unsqueeze, {r, graph.insertConstant(*joinDim)}, 1);
    if (!stack && !split->keepdim)
      shaped =
          graph.create(c10::aten::select, {r, graph.insertConstant(*joinDim), graph.insertConstant(int64_t{0})}, 1);
    if (shaped) {
      graph.insertNode(shaped)->setSourceRange(n->sourceRange());
      shaped->output()->setType(c10::TensorType::get());
      r = shaped->output();
    }
    r->setType(n->output()->type());

    RewriteEvent e;
    e.add(nodes);
    e.reason = std::string(n->kind().toUnqualString()) + " over the " + (stack ? "stack" : "cat") + "'s dim -> " +
               split->join.toUnqualString() + " of its " + std::to_string(pieces.size()) + " pieces";
    e.fusedOp = r->node()->kind().toQualString();
    rw.replaceAllUsesWith(n->output(), r);
    rw.notifyRewrite(std::move(e), r->node());
    rw.erase(n);
    return true;
  }
};

}  // namespace

bool SplitCatReductions(std::shared_ptr<Graph>& graph) {
  SplitCatReductionsPattern pattern;
  bool changed = runPattern(graph, pattern);
  if (changed) eraseDeadCode(graph);
  return changed;
}

}  // namespace tsfuse
