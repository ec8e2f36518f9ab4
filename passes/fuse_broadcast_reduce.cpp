#include "passes/fuse_broadcast_reduce.h"

#include "passes/region.h"

#include <torch/csrc/jit/ir/constants.h>

#include <unordered_map>
#include <unordered_set>

namespace tsfuse {
namespace {

constexpr const char* kPass = "fuse_broadcast_reduce";

struct FuseBroadcastReduceImpl {
  std::shared_ptr<Graph> graph;
  std::unique_ptr<AliasDb> aliasDb;
  std::unordered_set<Node*> seen;
  bool changed = false;

  explicit FuseBroadcastReduceImpl(std::shared_ptr<Graph> g) : graph(std::move(g)) {}

  bool run() {
    processBlock(graph->block());
    return changed;
  }

  void processBlock(torch::jit::Block* block) {
    for (Node* n : block->nodes())
      for (torch::jit::Block* sub : n->blocks()) processBlock(sub);
    bool again = true;
    while (again) {
      again = false;
      for (Node* n : block->nodes()) {
        if (seen.count(n)) continue;
        seen.insert(n);
        ReductionMatch rm;
        if (!matchReduction(n, rm, nullptr)) continue;
        if (tryFuse(n, rm)) {
          again = true;
          break;
        }
      }
    }
  }

  bool notifyMatchFailure(Node* reduction, const std::vector<std::string>& nodes, const std::vector<std::string>& ids,
                          std::string reason) {
    FusionEvent e;
    e.kind = FusionEvent::Kind::Reject;
    e.pass = kPass;
    e.reason = std::move(reason);
    e.nodes = {describeNode(reduction)};
    e.nodes.insert(e.nodes.end(), nodes.begin(), nodes.end());
    e.nodeIds = {nodeId(reduction)};
    e.nodeIds.insert(e.nodeIds.end(), ids.begin(), ids.end());
    emitEvent(std::move(e));
    return false;
  }

  // True when every use of v is a reduction of v (e.g. a minimum along each dim, as in Chamfer).
  static bool onlyReductions(Value* v) {
    for (const auto& use : v->uses()) {
      ReductionMatch m;
      if (use.offset != 0 || use.user->owningBlock() != v->node()->owningBlock() ||
          !matchReduction(use.user, m, nullptr))
        return false;
    }
    return true;
  }

  // reduction_k(f(x)), reduction_j(f(x))  =>  reduction_k(f'(x)), reduction_j(f(x))
  // Clones the region producing v for `reduction` alone, so each reduction fuses on its own and
  // the shared broadcast value is never stored. Returns the clone of v's producer.
  Node* duplicateFor(Node* reduction, Value* v, const Region& r) {
    std::unordered_map<Value*, Value*> map;
    torch::jit::WithInsertPoint guard(reduction);
    for (Node* n : r.nodes) {
      Node* c = graph->insertNode(graph->createClone(n, [&](Value* in) {
        auto it = map.find(in);
        return it == map.end() ? in : it->second;
      }));
      c->setSourceRange(n->sourceRange());
      map[n->output()] = c->output();
    }
    reduction->replaceInputWith(v, map.at(v));
    aliasDb.reset();
    return map.at(v)->node();
  }

  // reduce: reduction((elementwise op)+)  =>  tsfuse::reduce(operands, expr, kind, dim, keepdim, dtype)
  bool tryFuse(Node* reduction, const ReductionMatch& rm) {
    Node* producer = rm.input->node();
    ElementwiseMatch m;
    std::string why;
    if (producer->owningBlock() != reduction->owningBlock() || !matchElementwise(producer, m, &why))
      return false;  // reducing a value no elementwise op made here: not a candidate
    if (rm.input->uses().size() != 1 && !onlyReductions(rm.input))
      return notifyMatchFailure(reduction, {describeNode(producer)}, {nodeId(producer)},
                                "the reduced value %" + rm.input->debugName() +
                                    " is also used elsewhere, so it is materialised anyway");
    Region r = growRegion(producer);
    if (!aliasDb) aliasDb = std::make_unique<AliasDb>(graph);
    std::string hazard = regionHazard(r, *aliasDb);
    if (!hazard.empty()) return notifyMatchFailure(reduction, r.describe(), r.ids(), hazard);
    std::string dup;
    if (rm.input->uses().size() != 1) {  // several reductions: this one gets its own copy
      dup = "; the elementwise region is recomputed for each of the " +
            std::to_string(rm.input->uses().size()) + " reductions of %" + rm.input->debugName();
      r = growRegion(duplicateFor(reduction, rm.input, r));
    }

    FusionEvent e;
    e.kind = FusionEvent::Kind::Rewrite;
    e.pass = kPass;
    e.nodes = r.describe();
    e.nodes.push_back(describeNode(reduction));
    e.nodeIds = r.ids();
    e.nodeIds.push_back(nodeId(reduction));
    e.expr = r.expr.str() + " |> " + describe(rm.spec);
    e.fusedOp = "tsfuse::reduce";
    e.reason = "fused " + std::to_string(r.nodes.size()) + " elementwise ops and " +
               reduction->kind().toQualString();
    for (const auto& b : r.boundary) e.reason += "; " + b;
    e.reason += dup;

    c10::IValue dims;  // None: all dims
    if (rm.spec.dims) dims = c10::IValue(c10::List<int64_t>(*rm.spec.dims));
    c10::IValue dtype;
    if (rm.spec.dtype) dtype = c10::IValue(static_cast<int64_t>(*rm.spec.dtype));
    for (Node* n : r.nodes) seen.erase(n);  // destroyed below; their addresses may be reused
    seen.erase(reduction);
    Node* fused = nullptr;
    if (rm.spec.withIndices()) {
      e.fusedOp = "tsfuse::reduce_with_indices";
      fused = rewriteWithIndices(r, reduction, rm.spec);
    } else {
      fused = rewriteRegion(*graph, r, reduction, "tsfuse::reduce",
                            {reductionText(rm.spec), dims, rm.spec.keepdim, dtype});
      fused = absorbEpilogue(fused, e);
    }
    seen.insert(fused);
    e.fusedNode = nodeId(fused);
    aliasDb.reset();
    changed = true;
    emitEvent(std::move(e));
    return true;
  }

  // max/min with indices: (values, indices) = aten::max(region, dim, keepdim)
  //   =>  (values, indices) = tsfuse::reduce_with_indices(operands, expr, "max", dim, keepdim)
  // The fused op has two outputs, which rewriteRegion (one output) does not create.
  Node* rewriteWithIndices(Region& r, Node* reduction, const ReduceSpec& spec) {
    torch::jit::WithInsertPoint guard(reduction);
    Graph& g = *graph;
    Value* list = g.insertNode(g.createList(c10::TensorType::get(), r.operands))->output();
    Node* fused = g.create(c10::Symbol::fromQualString("tsfuse::reduce_with_indices"), 2);
    fused->addInput(list);
    fused->addInput(g.insertConstant(r.expr.str()));
    fused->addInput(g.insertConstant(reductionText(spec)));
    fused->addInput(g.insertConstant((*spec.dims)[0]));
    fused->addInput(g.insertConstant(spec.keepdim));
    g.insertNode(fused);
    fused->setSourceRange(reduction->sourceRange());
    for (size_t i = 0; i < 2; ++i) {
      fused->output(i)->setType(reduction->output(i)->type());
      reduction->output(i)->replaceAllUsesWith(fused->output(i));
    }
    reduction->destroy();
    for (auto it = r.nodes.rbegin(); it != r.nodes.rend(); ++it) (*it)->destroy();
    return fused;
  }

  // The elementwise chain that consumes the reduced value alone: each node is the only user of
  // the previous value (possibly several times, as in mul(d, d)).
  std::vector<Node*> epilogueChain(Node* fused, std::vector<ElementwiseMatch>& matches) {
    std::vector<Node*> chain;
    Value* c = fused->output();
    while (!c->uses().empty()) {
      Node* user = c->uses()[0].user;
      bool single = true;
      for (const auto& u : c->uses()) single &= u.user == user;
      ElementwiseMatch m;
      std::string why;
      if (!single || user->owningBlock() != fused->owningBlock() || !matchElementwise(user, m, &why)) break;
      chain.push_back(user);
      matches.push_back(std::move(m));
      c = user->output();
    }
    return chain;
  }

  // epilogue: z = f(tsfuse::reduce(ops, expr, ...), w)  =>  z = tsfuse::reduce(ops + [w], expr, ..., epilogue="v1: f($0, $1)")
  // The fused op moves to the chain's last node, so the reduced value is never stored.
  // NB: moving the reduction later is safe because regionHazard rejected operands with writers;
  // the epilogue's operands are checked the same way here.
  Node* absorbEpilogue(Node* fused, FusionEvent& event) {
    std::vector<ElementwiseMatch> matches;
    std::vector<Node*> chain = epilogueChain(fused, matches);
    if (chain.empty()) return fused;
    Expr epi;
    std::vector<Value*> extra;
    std::unordered_map<Value*, int64_t> valueIndex{{fused->output(), -1}};
    for (size_t k = 0; k < chain.size(); ++k) {
      Instr ins{matches[k].op, {}};
      for (const MatchedArg& a : matches[k].args) {
        if (!a.tensor) {
          ins.args.push_back(a.constant);
        } else if (auto it = valueIndex.find(a.tensor); it != valueIndex.end()) {
          ins.args.push_back(it->second < 0 ? Arg::input(0) : Arg::value(it->second));
        } else {
          auto pos = std::find(extra.begin(), extra.end(), a.tensor);
          if (pos == extra.end()) pos = extra.insert(extra.end(), a.tensor);
          ins.args.push_back(Arg::input(1 + (pos - extra.begin())));
        }
      }
      epi.instrs.push_back(std::move(ins));
      valueIndex.emplace(chain[k]->output(), static_cast<int64_t>(k));
    }
    epi.numInputs = 1 + static_cast<int>(extra.size());
    epi.validate();
    AliasDb db(graph);
    for (Value* v : extra) {
      if (db.hasWriters(v)) {
        event.reason += "; epilogue not fused: operand %" + v->debugName() + " is written by an in-place op";
        return fused;
      }
    }

    Node* last = chain.back();
    torch::jit::WithInsertPoint guard(last);
    Graph& g = *graph;
    std::vector<Value*> operands(fused->input(0)->node()->inputs().begin(), fused->input(0)->node()->inputs().end());
    operands.insert(operands.end(), extra.begin(), extra.end());
    Value* list = g.insertNode(g.createList(c10::TensorType::get(), operands))->output();
    Node* withEpi = g.create(fused->kind(), 1);
    withEpi->addInput(list);
    for (size_t i = 1; i <= 5; ++i) withEpi->addInput(fused->input(i));  // expr .. dtype
    withEpi->addInput(g.insertConstant(epi.str()));
    g.insertNode(withEpi);
    withEpi->setSourceRange(last->sourceRange());
    withEpi->output()->setType(last->output()->type());
    last->output()->replaceAllUsesWith(withEpi->output());
    for (Node* n : chain) event.nodes.push_back(describeNode(n));
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      seen.erase(*it);
      (*it)->destroy();
    }
    Node* oldList = fused->input(0)->node();
    fused->destroy();
    if (!oldList->hasUses()) oldList->destroy();
    event.expr += " |> " + epi.str();
    event.reason += "; epilogue of " + std::to_string(chain.size()) + " elementwise ops";
    return withEpi;
  }
};

}  // namespace

bool FuseBroadcastReduce(std::shared_ptr<Graph>& graph) { return FuseBroadcastReduceImpl(graph).run(); }

}  // namespace tsfuse
