#include "passes/sink_views.h"

#include "passes/analysis/grad_scope.h"
#include "passes/analysis/op_table.h"
#include "passes/analysis/read_hazards.h"
#include "passes/analysis/shape_facts.h"
#include "passes/framework/driver.h"
#include "passes/regions/region.h"
#include "passes/regions/rewrite.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace tsfuse {
namespace {

using torch::jit::Graph;
using torch::jit::toIValue;

// Sinking recomputes the intermediate's subexpression once per view; beyond this many recomputed
// ops in all, storing the intermediate is the better trade.
constexpr size_t kMaxRecomputed = 256;

// f's expression over its tensor leaves alone (appended to `tensors`): a number known only at run
// time is read as the literal 1 of its type, which gives the same dtypes and layout (a number
// broadcasts nothing), so the views need no operand for it.
Expr layoutOverTensors(const Region& f, std::vector<Value*>& tensors) {
  std::vector<int64_t> index(f.operands.size(), -1);
  for (size_t i = 0; i < f.operands.size(); ++i)
    if (isTensor(f.operands[i])) {
      index[i] = static_cast<int64_t>(tensors.size());
      tensors.push_back(f.operands[i]);
    }
  Expr e = f.expr;
  for (Instr& ins : e.instrs)
    for (Arg& a : ins.args) {
      if (a.kind != Arg::Kind::Input) continue;
      const c10::TypeKind k = f.operands[a.i]->type()->kind();
      if (index[a.i] >= 0)
        a.i = index[a.i];
      else
        a = k == c10::TypeKind::FloatType  ? Arg::floating(1.0)
            : k == c10::TypeKind::BoolType ? Arg::boolean(true)
                                           : Arg::integer(1);
    }
  e.numInputs = static_cast<int>(tensors.size());
  return e;
}

int64_t constInt(Value* v) { return toIValue(v)->toInt(); }

struct SinkViewsPattern : Pattern {
  RankBounds ranks;

  SinkViewsPattern() : Pattern("sink_views", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override { return viewKind(n) != ViewKind::None && trySink(n, rw); }

  // Why the layout of `view` could be observed, or "": it, or a view of it (transitively), is
  // used by something other than an elementwise read (a graph output, a call, a matmul, ...).
  // NB: sinking makes the view's result a fresh dense tensor where eager returns a strided view.
  std::string layoutObserver(Value* view, int depth = 0) {
    for (const auto& use : view->uses()) {
      if (isFreshReader(use.user)) continue;
      if (viewKind(use.user) != ViewKind::None && use.offset == 0 && depth < 64) {
        std::string why = layoutObserver(use.user->output(), depth + 1);
        if (!why.empty()) return why;
        continue;
      }
      return std::string(depth ? "a view of it" : "the view") + " is used by " + describeNode(use.user) +
             ", which may observe its layout or identity";
    }
    return "";
  }

  // Why view v of intermediate x cannot be sunk, or "".
  std::string viewHazard(Node* v, Value* x, Rewriter& rw) {
    if (v->owningBlock() != x->node()->owningBlock()) return describeNode(v) + " is in another block";
    if (std::string scope = gradScopeBoundary(v, x->node()); !scope.empty()) return "the view and its value: " + scope;
    if (std::string why = layoutObserver(v->output()); !why.empty()) return why;
    ViewKind k = viewKind(v);
    int64_t d = constInt(v->input(1));
    if (k == ViewKind::Select && std::max(ranks.atLeast(x), rankFor(d)) < 2)
      return "cannot prove %" + x->debugName() +
             " has rank >= 2 (selecting from a 1-D value could change type promotion)";
    if (k == ViewKind::Squeeze && ranks.atLeast(x) < 2)
      return "cannot prove %" + x->debugName() +
             " has rank >= 2 (squeezing a 1-D value could make it 0-dim, which changes type promotion)";
    if (rw.aliasDb().hasWriters(v->output())) return "the view is written by an in-place op";
    return "";
  }

  static bool reject(Node* v, const std::string& why, Rewriter& rw) {
    return rw.notifyMatchFailure({v, v->input(0)->node()},
                                 "view of intermediate %" + v->input(0)->debugName() + " not sunk: " + why);
  }

  // view(f(leaves...)) -> f(broadcast_view(leaves)...)
  //
  //   %d = aten::sub(%a, %b)                %v = tsfuse::broadcast_select([%a, %b], 2, 0, "<f>")
  //   %s = aten::select(%d, 2, 0)     =>    %a0, %b0 = prim::ListUnpack(%v)
  //                                         %s = aten::sub(%a0, %b0)
  //
  // "<f>" is f's expression over the leaves: with it the op gives the views the layout eager's
  // view of f(leaves) has, where f over the views alone would lay them out otherwise.
  bool trySink(Node* v, Rewriter& rw) {
    Value* x = v->input(0);
    Node* producer = x->node();
    ElementwiseMatch pm;
    if (producer->owningBlock() != v->owningBlock() || !matchElementwise(producer, pm, nullptr) ||
        producer->kind() == c10::aten::to || !viewsCommute(pm))
      return false;  // a view of a leaf (input, call result, ...): it simply becomes an operand
    for (const auto& use : x->uses()) {
      if (viewKind(use.user) == ViewKind::None || use.offset != 0)
        return reject(v, "it is also used by " + describeNode(use.user) + ", so it is materialised anyway", rw);
      std::string why = viewHazard(use.user, x, rw);
      if (!why.empty()) return reject(v, why, rw);
    }
    if (rw.aliasDb().hasWriters(x)) return reject(v, "it is written by an in-place op", rw);

    // The elementwise subexpression: grown from the producer through values used only inside it.
    std::vector<Node*> nodes = {producer};
    std::unordered_set<Node*> in = {producer};
    for (bool grew = true; grew;) {
      grew = false;
      for (size_t i = 0; i < nodes.size(); ++i) {
        for (Value* arg : nodes[i]->inputs()) {
          Node* p = arg->node();
          ElementwiseMatch m;
          if (in.count(p) || !sameGradScope(p, producer) || !matchElementwise(p, m, nullptr) ||
              p->kind() == c10::aten::to || !viewsCommute(m) || p->outputs().size() != 1)
            continue;
          bool inside = std::all_of(arg->uses().begin(), arg->uses().end(),
                                    [&](const torch::jit::Use& u) { return in.count(u.user) > 0; });
          if (!inside) continue;
          nodes.push_back(p);
          in.insert(p);
          grew = true;
        }
      }
    }
    if (nodes.size() * x->uses().size() > kMaxRecomputed)
      return reject(v,
                    "its " + std::to_string(x->uses().size()) + " views would recompute " +
                        std::to_string(nodes.size()) + " elementwise ops each (limit " +
                        std::to_string(kMaxRecomputed) + " in all)",
                    rw);
    // f over its leaves: the views take the layout eager's view of f(leaves) would have.
    Region f = regionOf(nodes);
    nodes = f.nodes;
    std::vector<Value*> leaves;  // the tensors: the copies read a runtime number as the originals do
    const Expr layout = layoutOverTensors(f, leaves);
    for (Node* n : nodes)
      for (Value* arg : n->inputs())
        if (!in.count(arg->node()) && isTensor(arg) && std::find(leaves.begin(), leaves.end(), arg) == leaves.end())
          return reject(v, describeNode(n) + " reads a tensor that is not one of its elementwise operands", rw);
    // The copies read the leaves at v, the originals from nodes.front() on.
    if (Node* w = writerBetween(leaves, nodes.front(), v, rw.aliasDb()))
      return reject(v,
                    "a leaf (or a tensor it may alias) is written by an in-place op (" + describeNode(w) +
                        ") between the intermediate and its view",
                    rw);

    ViewKind kind = viewKind(v);
    int64_t rankX = ranks.atLeast(x);
    Graph& graph = rw.graph();
    torch::jit::WithInsertPoint guard(v);
    Value* list = graph.insertNode(graph.createList(c10::TensorType::get(), leaves))->output();
    std::vector<torch::jit::NamedValue> args = {list};
    for (size_t i = 1; i < v->inputs().size(); ++i) args.emplace_back(v->input(i));
    const char* op = kind == ViewKind::Select    ? "tsfuse::broadcast_select"
                     : kind == ViewKind::Slice   ? "tsfuse::broadcast_slice"
                     : kind == ViewKind::Squeeze ? "tsfuse::broadcast_squeeze"
                                                 : "tsfuse::broadcast_unsqueeze";
    Value* views = graph.insert(c10::Symbol::fromQualString(op), args,
                                {torch::jit::NamedValue("layout", c10::IValue(layout.str()))}, v->sourceRange());
    Node* unpack = graph.insertNode(graph.createListUnpack(views, leaves.size()));
    std::unordered_map<Value*, Value*> map;
    for (size_t i = 0; i < leaves.size(); ++i) map[leaves[i]] = unpack->output(i);
    map = cloneNodes(graph, nodes, std::move(map));
    Value* result = map.at(x);
    ranks.remember(result, kind == ViewKind::Select || kind == ViewKind::Squeeze ? rankX - 1
                           : kind == ViewKind::Unsqueeze                         ? rankX + 1
                                                                                 : rankX);
    RewriteEvent e;
    e.add(v).add(nodes);
    e.fusedOp = op;
    e.reason = std::string("pushed ") + v->kind().toQualString() + " of %" + x->debugName() + " to its " +
               std::to_string(leaves.size()) + " leaves (" + std::to_string(nodes.size()) +
               " elementwise ops recomputed on the views)";
    // The alias database stays valid: the leaf views alias their leaves, the result takes the
    // view's place, and the lists and the other copies are new values only the rewrite reads.
    std::vector<Value*> fresh = {list, views};
    for (size_t i = 0; i < leaves.size(); ++i) rw.copyAliasing(leaves[i], unpack->output(i));
    for (Node* n : nodes)
      if (map.at(n->output()) != result) fresh.push_back(map.at(n->output()));
    rw.replaceAllUsesWith(v->output(), result);
    rw.notifyRewrite(std::move(e), views->node());
    rw.erase(v);
    rw.keepAliasDb(std::move(fresh));
    return true;
  }
};

}  // namespace

bool SinkViews(std::shared_ptr<Graph>& graph) {
  SinkViewsPattern pattern;
  bool changed = runPattern(graph, pattern);
  if (changed) eraseDeadCode(graph);  // the intermediates whose views all moved
  return changed;
}

}  // namespace tsfuse
