#include "passes/sink_views.h"

#include "passes/driver.h"
#include "passes/op_table.h"
#include "passes/region.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <optional>
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
      if (index[a.i] >= 0) a.i = index[a.i];
      else a = k == c10::TypeKind::FloatType ? Arg::floating(1.0) : k == c10::TypeKind::BoolType ? Arg::boolean(true) : Arg::integer(1);
    }
  e.numInputs = static_cast<int>(tensors.size());
  return e;
}

// The view kind of n when it is select.int / slice.Tensor / unsqueeze with constant arguments.
ViewKind viewKind(Node* n) {
  if (n->kind() != c10::aten::select && n->kind() != c10::aten::slice && n->kind() != c10::aten::unsqueeze)
    return ViewKind::None;
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
    if (auto other = otherViewRank(p, depth)) {
      minRanks[v] = *other;
      return *other;
    }
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

  // A lower bound of the rank of p's tensor output for the ops viewKind does not cover: list
  // elements of chunk/split/unbind (unpacked or indexed), and rank-keeping or rank-fixing views.
  std::optional<int64_t> otherViewRank(Node* p, int depth) {
    using namespace c10;
    if (p->kind() == prim::ListUnpack || p->kind() == aten::__getitem__) {
      if (p->kind() == aten::__getitem__ && p->outputs().size() != 1) return std::nullopt;
      return splitElementRank(p->input(0)->node(), depth);
    }
    const c10::FunctionSchema* s = p->maybeSchema();
    if (!s || p->inputs().empty() || !p->input(0)->type()->isSubtypeOf(*TensorType::get())) return std::nullopt;
    const std::string& o = s->overload_name();
    auto self = [&] { return minRank(p->input(0), depth + 1); };
    if (p->kind() == aten::transpose && o == "int")  // a 0-dim tensor accepts dims 0 and -1
      return std::max({self(), dimRank(p->input(1), true), dimRank(p->input(2), true)});
    if ((p->kind() == aten::t || p->kind() == aten::contiguous || p->kind() == aten::clone ||
         p->kind() == aten::detach) && o.empty())
      return self();
    if ((p->kind() == aten::permute || p->kind() == aten::view || p->kind() == aten::reshape) && o.empty())
      return listLength(p->input(1));  // the rank is the list's length
    if ((p->kind() == aten::expand || p->kind() == aten::repeat) && o.empty()) {
      auto n = listLength(p->input(1));
      return n ? std::max(*n, self()) : self();
    }
    return std::nullopt;
  }

  // The rank bound of each tensor of the list `list` makes (chunk/split/unbind of a tensor).
  std::optional<int64_t> splitElementRank(Node* list, int depth) {
    using namespace c10;
    const c10::FunctionSchema* s = list->maybeSchema();
    if (!s || list->inputs().size() < 2 || !list->input(0)->type()->isSubtypeOf(*TensorType::get()))
      return std::nullopt;
    for (const auto& use : list->output()->uses())  // a list mutated later could hold other tensors
      if (use.user->kind() != prim::ListUnpack && use.user->kind() != aten::__getitem__) return std::nullopt;
    const bool unbind = list->kind() == aten::unbind && s->overload_name() == "int";
    const bool keeps = list->kind() == aten::chunk || list->kind() == aten::split ||
                       list->kind() == aten::split_with_sizes || list->kind() == aten::tensor_split ||
                       list->kind() == aten::unsafe_chunk || list->kind() == aten::unsafe_split;
    if (!unbind && !keeps) return std::nullopt;
    Value* dim = list->inputs().back();  // every such overload ends with `int dim`
    int64_t r = std::max(minRank(list->input(0), depth + 1), dimRank(dim));
    return unbind ? std::max<int64_t>(r - 1, 0) : r;
  }

  // The least rank a constant dim argument implies (0 when it is not a constant int, or when
  // `scalarOk` and the op accepts it on a 0-dim tensor, as it does dims 0 and -1).
  static int64_t dimRank(Value* d, bool scalarOk = false) {
    auto iv = toIValue(d);
    if (!iv || !iv->isInt() || (scalarOk && (iv->toInt() == 0 || iv->toInt() == -1))) return 0;
    return rankFor(iv->toInt());
  }

  // The length of an int[] argument built by prim::ListConstruct or a constant.
  static std::optional<int64_t> listLength(Value* l) {
    if (l->node()->kind() == c10::prim::ListConstruct) return static_cast<int64_t>(l->node()->inputs().size());
    if (auto iv = toIValue(l); iv && iv->isIntList()) return static_cast<int64_t>(iv->toIntList().size());
    return std::nullopt;
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
    // f over its leaves: the views take the layout eager's view of f(leaves) would have.
    Region f = regionOf(nodes);
    nodes = f.nodes;
    std::vector<Value*> leaves;  // the tensors: the copies read a runtime number as the originals do
    const Expr layout = layoutOverTensors(f, leaves);
    for (Node* n : nodes)
      for (Value* arg : n->inputs())
        if (!in.count(arg->node()) && isTensor(arg) &&
            std::find(leaves.begin(), leaves.end(), arg) == leaves.end())
          return reject(v, describeNode(n) + " reads a tensor that is not one of its elementwise operands", rw);
    // The copies read the leaves at v, the originals from nodes.front() on.
    if (Node* w = writerBetween(leaves, nodes.front(), v, rw.aliasDb()))
      return reject(v, "a leaf (or a tensor it may alias) is written by an in-place op (" + describeNode(w) +
                           ") between the intermediate and its view", rw);

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
    Value* views = graph.insert(c10::Symbol::fromQualString(op), args,
                                {torch::jit::NamedValue("layout", c10::IValue(layout.str()))}, v->sourceRange());
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
