#include "passes/fuse_broadcast_reduce.h"

#include "passes/region.h"

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

  // reduce: reduction((elementwise op)+)  =>  tsfuse::reduce(operands, expr, kind, dim, keepdim, dtype)
  bool tryFuse(Node* reduction, const ReductionMatch& rm) {
    Node* producer = rm.input->node();
    ElementwiseMatch m;
    std::string why;
    if (producer->owningBlock() != reduction->owningBlock() || !matchElementwise(producer, m, &why))
      return false;  // reducing a value no elementwise op made here: not a candidate
    if (rm.input->uses().size() != 1)
      return notifyMatchFailure(reduction, {describeNode(producer)}, {nodeId(producer)},
                                "the reduced value %" + rm.input->debugName() +
                                    " is also used elsewhere, so it is materialised anyway");
    Region r = growRegion(producer);
    if (!aliasDb) aliasDb = std::make_unique<AliasDb>(graph);
    std::string hazard = regionHazard(r, *aliasDb);
    if (!hazard.empty()) return notifyMatchFailure(reduction, r.describe(), r.ids(), hazard);

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

    c10::IValue dims;  // None: all dims
    if (rm.spec.dims) dims = c10::IValue(c10::List<int64_t>(*rm.spec.dims));
    c10::IValue dtype;
    if (rm.spec.dtype) dtype = c10::IValue(static_cast<int64_t>(*rm.spec.dtype));
    for (Node* n : r.nodes) seen.erase(n);  // destroyed below; their addresses may be reused
    seen.erase(reduction);
    Node* fused = rewriteRegion(*graph, r, reduction, "tsfuse::reduce",
                                {std::string(reductionName(rm.spec.kind)), dims, rm.spec.keepdim, dtype});
    seen.insert(fused);
    e.fusedNode = nodeId(fused);
    aliasDb.reset();
    changed = true;
    emitEvent(std::move(e));
    return true;
  }
};

}  // namespace

bool FuseBroadcastReduce(std::shared_ptr<Graph>& graph) { return FuseBroadcastReduceImpl(graph).run(); }

}  // namespace tsfuse
