#include "passes/sink_views.h"

#include "passes/driver.h"
#include "passes/op_table.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

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

enum class ViewKind { None, Select, Slice, Unsqueeze };

// The view kind of n when it is select.int / slice.Tensor / unsqueeze with constant arguments.
ViewKind viewKind(Node* n) {
  const c10::FunctionSchema* s = n->maybeSchema();
  if (!s) return ViewKind::None;
  ViewKind k = ViewKind::None;
  if (n->kind() == c10::aten::select && s->overload_name() == "int") k = ViewKind::Select;
  else if (n->kind() == c10::aten::slice && s->overload_name() == "Tensor") k = ViewKind::Slice;
  else if (n->kind() == c10::aten::unsqueeze && s->overload_name().empty()) k = ViewKind::Unsqueeze;
  if (k == ViewKind::None) return k;
  for (size_t i = 1; i < n->inputs().size(); ++i)
    if (!toIValue(n->input(i))) return ViewKind::None;
  return k;
}

int64_t constInt(Value* v) { return toIValue(v)->toInt(); }

// The least rank a tensor must have for dim `d` to be valid in it.
int64_t rankFor(int64_t d) { return d >= 0 ? d + 1 : -d; }

struct SinkViewsPattern : Pattern {
  std::unordered_map<Value*, int64_t> minRanks;

  SinkViewsPattern() : Pattern("sink_views", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    return viewKind(n) != ViewKind::None && trySink(n, rw);
  }

  // A lower bound of v's rank from its type, or from the view ops and elementwise ops that made it.
  int64_t minRank(Value* v, int depth = 0) {
    if (auto t = v->type()->cast<c10::TensorType>(); t && t->dim()) return static_cast<int64_t>(*t->dim());
    if (auto it = minRanks.find(v); it != minRanks.end()) return it->second;
    if (depth > 64) return 0;
    Node* p = v->node();
    int64_t r = 0;
    ElementwiseMatch m;
    switch (viewKind(p)) {
      case ViewKind::Unsqueeze:
        r = std::max(minRank(p->input(0), depth + 1) + 1, rankFor(constInt(p->input(1))));
        break;
      case ViewKind::Select:
        r = std::max(minRank(p->input(0), depth + 1), rankFor(constInt(p->input(1)))) - 1;
        break;
      case ViewKind::Slice:
        r = std::max(minRank(p->input(0), depth + 1), rankFor(constInt(p->input(1))));
        break;
      case ViewKind::None:
        if (matchElementwise(p, m, nullptr))
          for (const MatchedArg& a : m.args)
            if (a.tensor) r = std::max(r, minRank(a.tensor, depth + 1));
        break;
    }
    minRanks[v] = r;
    return r;
  }

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
    if (std::string why = layoutObserver(v->output()); !why.empty()) return why;
    ViewKind k = viewKind(v);
    int64_t d = constInt(v->input(1));
    if (k == ViewKind::Select && std::max(minRank(x), rankFor(d)) < 2)
      return "cannot prove %" + x->debugName() +
             " has rank >= 2 (selecting from a 1-D value could change type promotion)";
    if (rw.aliasDb().hasWriters(v->output())) return "the view is written by an in-place op";
    return "";
  }

  static bool reject(Node* v, const std::string& why, Rewriter& rw) {
    return rw.notifyMatchFailure({v, v->input(0)->node()},
                                 "view of intermediate %" + v->input(0)->debugName() + " not sunk: " + why);
  }

  // view(f(leaves...)) -> f(broadcast_view(leaves)...)
  //
  //   %d = aten::sub(%a, %b)                %v = tsfuse::broadcast_select([%a, %b], 2, 0)
  //   %s = aten::select(%d, 2, 0)     =>    %a0, %b0 = prim::ListUnpack(%v)
  //                                         %s = aten::sub(%a0, %b0)
  bool trySink(Node* v, Rewriter& rw) {
    Value* x = v->input(0);
    Node* producer = x->node();
    ElementwiseMatch pm;
    if (producer->owningBlock() != v->owningBlock() || !matchElementwise(producer, pm, nullptr) ||
        producer->kind() == c10::aten::to)
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
          if (in.count(p) || p->owningBlock() != producer->owningBlock() || !matchElementwise(p, m, nullptr) ||
              p->kind() == c10::aten::to || p->outputs().size() != 1)
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
      return reject(v, "its " + std::to_string(x->uses().size()) + " views would recompute " +
                           std::to_string(nodes.size()) + " elementwise ops each (limit " +
                           std::to_string(kMaxRecomputed) + " in all)", rw);
    std::sort(nodes.begin(), nodes.end(), [](Node* a, Node* b) { return a->isBefore(b); });
    std::vector<Value*> leaves;
    for (Node* n : nodes)
      for (Value* arg : n->inputs())
        if (!in.count(arg->node()) && arg->type()->isSubtypeOf(*c10::TensorType::get()) &&
            std::find(leaves.begin(), leaves.end(), arg) == leaves.end())
          leaves.push_back(arg);
    for (Value* l : leaves)
      if (rw.aliasDb().hasWriters(l))
        return reject(v, "its leaf %" + l->debugName() + " (or a tensor it may alias) is written by an in-place op", rw);

    ViewKind kind = viewKind(v);
    int64_t rankX = minRank(x);
    Graph& graph = rw.graph();
    torch::jit::WithInsertPoint guard(v);
    Value* list = graph.insertNode(graph.createList(c10::TensorType::get(), leaves))->output();
    std::vector<torch::jit::NamedValue> args = {list};
    for (size_t i = 1; i < v->inputs().size(); ++i) args.emplace_back(v->input(i));
    const char* op = kind == ViewKind::Select ? "tsfuse::broadcast_select"
                     : kind == ViewKind::Slice ? "tsfuse::broadcast_slice"
                                               : "tsfuse::broadcast_unsqueeze";
    Value* views = graph.insert(c10::Symbol::fromQualString(op), args, {}, v->sourceRange());
    Node* unpack = graph.insertNode(graph.createListUnpack(views, leaves.size()));
    std::unordered_map<Value*, Value*> map;
    for (size_t i = 0; i < leaves.size(); ++i) map[leaves[i]] = unpack->output(i);
    for (Node* n : nodes) {
      Node* c = graph.insertNode(graph.createClone(n, [&](Value* in) {
        auto it = map.find(in);
        return it == map.end() ? in : it->second;
      }));
      c->setSourceRange(n->sourceRange());
      map[n->output()] = c->output();
    }
    Value* result = map.at(x);
    minRanks[result] = kind == ViewKind::Select ? rankX - 1 : kind == ViewKind::Unsqueeze ? rankX + 1 : rankX;
    RewriteEvent e;
    e.add(v).add(nodes);
    e.fusedOp = op;
    e.reason = std::string("pushed ") + v->kind().toQualString() + " of %" + x->debugName() + " to its " +
               std::to_string(leaves.size()) + " leaves (" + std::to_string(nodes.size()) +
               " elementwise ops recomputed on the views)";
    v->output()->replaceAllUsesWith(result);
    rw.notifyRewrite(std::move(e), views->node());
    rw.erase(v);
    return true;
  }
};

}  // namespace

bool SinkViews(std::shared_ptr<Graph>& graph) {
  SinkViewsPattern pattern;
  bool changed = runPattern(graph, pattern);
  if (changed) torch::jit::EliminateDeadCode(graph);  // the intermediates whose views all moved
  return changed;
}

}  // namespace tsfuse
