#include "passes/fuse_pairwise.h"

#include "passes/region.h"

#include <unordered_set>

namespace tsfuse {
namespace {

constexpr const char* kPass = "fuse_pairwise";

// True when every operand's shape is known and equals the output's: nothing broadcasts, so
// there is no larger intermediate to avoid; such regions are left to TorchScript's own fusers.
bool provablyNoBroadcast(const Region& r) {
  auto outType = r.root()->output()->type()->cast<c10::TensorType>();
  if (!outType) return false;
  auto outSizes = outType->sizes().concrete_sizes();
  if (!outSizes) return false;
  for (Value* v : r.operands) {
    auto t = v->type()->cast<c10::TensorType>();
    auto s = t ? t->sizes().concrete_sizes() : std::nullopt;
    if (!s || *s != *outSizes) return false;
  }
  return true;
}

struct FusePairwiseImpl {
  std::shared_ptr<Graph> graph;
  std::unique_ptr<AliasDb> aliasDb;
  std::unordered_set<Node*> seen;
  bool changed = false;

  explicit FusePairwiseImpl(std::shared_ptr<Graph> g) : graph(std::move(g)) {}

  bool run() {
    processBlock(graph->block());
    return changed;
  }

  void processBlock(torch::jit::Block* block) {
    for (Node* n : block->nodes())
      for (torch::jit::Block* sub : n->blocks()) processBlock(sub);
    // Roots are tried last-node-first so each region is grown from its final consumer.
    bool again = true;
    while (again) {
      again = false;
      for (auto it = block->nodes().rbegin(); it != block->nodes().rend(); ++it) {
        Node* n = *it;
        if (seen.count(n)) continue;
        seen.insert(n);
        ElementwiseMatch m;
        if (!matchElementwise(n, m, nullptr)) continue;
        if (tryFuse(n)) {
          again = true;
          break;
        }
      }
    }
  }

  bool notifyMatchFailure(const Region& r, std::string reason) {
    for (Node* n : r.nodes) seen.insert(n);
    FusionEvent e;
    e.kind = FusionEvent::Kind::Reject;
    e.pass = kPass;
    e.reason = std::move(reason);
    e.nodes = r.describe();
    e.nodeIds = r.ids();
    emitEvent(std::move(e));
    return false;
  }

  // pairwise: (elementwise op)+ over broadcast operands  =>  tsfuse::pairwise(operands, expr)
  bool tryFuse(Node* root) {
    // A lone to() may return its input itself (an alias); fused, it would return a copy.
    if (root->kind() == c10::aten::to) return false;
    Region r = growRegion(root);
    if (r.nodes.size() < 2) return false;  // a single op: nothing to fuse, not a candidate
    if (!aliasDb) aliasDb = std::make_unique<AliasDb>(graph);
    std::string hazard = regionHazard(r, *aliasDb);
    if (!hazard.empty()) return notifyMatchFailure(r, hazard);
    if (provablyNoBroadcast(r))
      return notifyMatchFailure(r, "no operand broadcasts (all shapes known and equal to the output's)");
    FusionEvent e;
    e.kind = FusionEvent::Kind::Rewrite;
    e.pass = kPass;
    e.nodes = r.describe();
    e.nodeIds = r.ids();
    e.expr = r.expr.str();
    e.fusedOp = "tsfuse::pairwise";
    e.reason = "fused " + std::to_string(r.nodes.size()) + " elementwise ops over " +
               std::to_string(r.operands.size()) + " operands";
    for (const auto& b : r.boundary) e.reason += "; " + b;
    for (Node* n : r.nodes) seen.erase(n);  // destroyed below; their addresses may be reused
    Node* fused = rewriteRegion(*graph, r, r.root(), "tsfuse::pairwise", {});
    seen.insert(fused);
    e.fusedNode = nodeId(fused);
    aliasDb.reset();  // the graph changed
    changed = true;
    emitEvent(std::move(e));
    return true;
  }
};

}  // namespace

bool FusePairwise(std::shared_ptr<Graph>& graph) { return FusePairwiseImpl(graph).run(); }

}  // namespace tsfuse
