#include "passes/fuse_broadcast_reduce.h"

#include "passes/region.h"

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

  bool notifyMatchFailure(Node* reduction, const std::vector<std::string>& nodes, std::string reason) {
    FusionEvent e;
    e.kind = FusionEvent::Kind::Reject;
    e.pass = kPass;
    e.reason = std::move(reason);
    e.nodes = {describeNode(reduction)};
    e.nodes.insert(e.nodes.end(), nodes.begin(), nodes.end());
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
      return notifyMatchFailure(reduction, {describeNode(producer)},
                                "the reduced value %" + rm.input->debugName() +
                                    " is also used elsewhere, so it is materialised anyway");
    Region r = growRegion(producer);
    if (!aliasDb) aliasDb = std::make_unique<AliasDb>(graph);
    std::string hazard = regionHazard(r, *aliasDb);
    if (!hazard.empty()) return notifyMatchFailure(reduction, r.describe(), hazard);
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
    Node* fused = rewriteRegion(*graph, r, reduction, "tsfuse::reduce",
                                {std::string(reductionName(rm.spec.kind)), dims, rm.spec.keepdim, dtype});
    seen.insert(fused);
    aliasDb.reset();
    changed = true;
    emitEvent(std::move(e));
    return true;
  }
};

}  // namespace

bool FuseBroadcastReduce(std::shared_ptr<Graph>& graph) { return FuseBroadcastReduceImpl(graph).run(); }

}  // namespace tsfuse
