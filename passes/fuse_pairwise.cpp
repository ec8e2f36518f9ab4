#include "passes/fuse_pairwise.h"

#include "passes/analysis/op_table.h"
#include "passes/framework/driver.h"
#include "passes/regions/region.h"
#include "passes/regions/region_hazards.h"
#include "passes/regions/repeats.h"
#include "passes/regions/rewrite.h"

#include <unordered_set>

namespace tsfuse {
namespace {

// Whether cast `n` reads an elementwise value of its block that nothing else reads (its metadata
// aside: a prototype's device, which a stand-in then gives).
bool castOfItsOwnValue(Node* n) {
  Value* x = n->input(0);
  ElementwiseMatch m;
  return valueReaders(x) == 1 && x->node()->owningBlock() == n->owningBlock() &&
         matchElementwise(x->node(), m, nullptr) && x->node()->kind() != c10::aten::to;
}

// True when every operand's shape is known and equals the output's: nothing broadcasts, so
// there is no larger intermediate to avoid; such regions are left to TorchScript's own fusers.
bool provablyNoBroadcast(const Region& r) {
  auto outType = r.root()->output()->type()->cast<c10::TensorType>();
  if (!outType) return false;
  auto outSizes = outType->sizes().concrete_sizes();
  if (!outSizes) return false;
  for (Value* v : r.operands) {
    if (!isTensor(v)) continue;  // a number broadcasts nothing
    auto t = v->type()->cast<c10::TensorType>();
    auto s = t ? t->sizes().concrete_sizes() : std::nullopt;
    if (!s || *s != *outSizes) return false;
  }
  return true;
}

// pairwise: (elementwise op)+ over broadcast operands  =>  tsfuse::pairwise(operands, expr)
//
//   %d = aten::sub(%a, %b)                 %l = prim::ListConstruct(%a, %b)
//   %e = aten::abs(%d)               =>    %e = tsfuse::pairwise(%l, "v1: sub($0, $1); abs(%0)")
//
// Roots are offered last-node-first, so each region is grown from its final consumer.
class FusePairwisePattern : public Pattern {
 public:
  FusePairwisePattern() : Pattern("fuse_pairwise", WalkOrder::Reverse, NestedBlocks::First) {}

  bool matchAndRewrite(Node* root, Rewriter& rw) override {
    if (claimed_.count(root)) return false;  // inside a region already rejected from a later root
    ElementwiseMatch m;
    if (!matchElementwise(root, m, nullptr)) return false;
    // to() may return its input itself (an alias); fused, it returns a fresh tensor. The two are
    // alike where the input is an elementwise value the cast alone reads: a fresh tensor nothing
    // else sees, `(d > 0).to(x.dtype)`.
    if (root->kind() == c10::aten::to && !castOfItsOwnValue(root)) return false;
    if (!root->output()->hasUses()) return false;  // dead (a value a stand-in replaced): cleanup erases it
    if (valueReaders(root->output()) == 0) return standIn(root, rw);
    Region r = growRegion(root);
    if (r.nodes.size() < 2) return false;  // a single op: nothing to fuse, not a candidate
    std::string hazard = regionHazard(r, r.root(), rw.aliasDb());
    if (!hazard.empty()) return reject(r, hazard, rw);
    if (provablyNoBroadcast(r))
      return reject(r, "no operand broadcasts (all shapes known and equal to the output's)", rw);
    std::string repeats = planBroadcastRepeats(r, r.root(), rw.aliasDb());
    RewriteEvent e;
    e.add(r.nodes).add(r.repeats);
    e.expr = r.expr.str();
    e.fusedOp = "tsfuse::pairwise";
    e.reason = "fused " + std::to_string(r.nodes.size()) + " elementwise ops over " +
               std::to_string(r.operands.size()) + " operands";
    for (const auto& b : r.boundary) e.reason += "; " + b;
    e.reason += repeats;
    Node* fused = rewriteRegion(rw, r, r.root(), "tsfuse::pairwise", {});
    // The erased nodes were pure elementwise ops; the fused op's output took the root's place
    // (rewriteRegion) and its operand list has no other reader. A broadcast_repeat may alias its
    // source: rebuild then.
    if (r.repeats.empty()) rw.keepAliasDb({fused->input(0)});
    rw.notifyRewrite(std::move(e), fused);
    return true;
  }

 private:
  // A value read for its metadata alone (its value readers fused, computing it again; a prototype's
  // source, passes/prototype_casts.h; a size): its readers read tsfuse::shape_of of its region,
  // and the value is not computed.
  //
  //   %tl = aten::max(%a1, %b1)              %s = tsfuse::shape_of([%a1, %b1], "v1: maximum($0, $1)")
  //   %d = prim::dtype(%tl)          =>      %d = prim::dtype(%s)
  static bool standIn(Node* root, Rewriter& rw) {
    Region r = growRegion(root);
    const torch::jit::Use first = root->output()->uses().front();
    const size_t readers = readMetadataFromStandIn(rw.graph(), r, root->output());
    RewriteEvent e;
    e.add(root);
    e.expr = r.expr.str();
    e.fusedOp = "tsfuse::shape_of";
    e.reason = std::to_string(readers) + " reader(s) of %" + root->output()->debugName() +
               "'s metadata alone read tsfuse::shape_of: the value is not computed";
    rw.notifyRewrite(std::move(e), first.user->input(first.offset)->node());
    rw.erase(root);  // its producers, now read by nothing, are no roots (cleanup erases them)
    return true;
  }

  // A rejected region's nodes are not offered as roots again: each would grow a part of it.
  bool reject(const Region& r, std::string reason, Rewriter& rw) {
    claimed_.insert(r.nodes.begin(), r.nodes.end());
    return rw.notifyMatchFailure(r.nodes, std::move(reason));
  }

  std::unordered_set<Node*> claimed_;
};

}  // namespace

bool FusePairwise(std::shared_ptr<Graph>& graph) {
  FusePairwisePattern pattern;
  return runPattern(graph, pattern);
}

}  // namespace tsfuse
