// sink_into_branches (passes/sink_into_branches.h):
//
//   %s = aten::div(%i, %u)                         %s = aten::div(%i, %u)        (its sizes read alone)
//   %n = aten::size(%s, 0)                         %n = aten::size(%s, 0)
//   %r = prim::If(%empty)                   =>     %r = prim::If(%empty)
//     block0(): ...                                  block0(): ...
//     block1(): %m = aten::amax(%s, 0)               block1(): %s2 = aten::div(%i, %u)
//                                                              %m = aten::amax(%s2, 0)
//
// The copied nodes are the value's elementwise producers in its block (at most kMaxCone): each
// branch that runs computes the value once, as the unfused graph did before the branch. Not into a
// loop body (each iteration would compute it again), nor where an operand may be written between
// the value's computation and the branch, or the autograd mode changes in between.
#include "passes/sink_into_branches.h"

#include "passes/analysis/grad_scope.h"
#include "passes/analysis/op_table.h"
#include "passes/analysis/read_hazards.h"
#include "passes/framework/driver.h"
#include "passes/regions/rewrite.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace tsfuse {
namespace {

using torch::jit::Block;
using torch::jit::Value;

constexpr size_t kMaxCone = 32;

// Whether every block between `n` and `top`, the node of n's ancestry that holds it (ancestorIn),
// is an if-branch: no loop body.
bool onlyBranchesBetween(Node* n, Node* top) {
  for (Node* at = n; at != top; at = at->owningBlock()->owningNode())
    if (at->owningBlock()->owningNode()->kind() != c10::prim::If) return false;
  return true;
}

// The elementwise nodes of v's block that compute v (v's node and its producers, through
// elementwise nodes of one output), in block order; empty where more than kMaxCone.
std::vector<Node*> coneOf(Value* v) {
  Block* block = v->node()->owningBlock();
  std::unordered_set<Node*> seen;
  std::vector<Node*> todo{v->node()}, cone;
  while (!todo.empty()) {
    Node* n = todo.back();
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    cone.push_back(n);
    if (cone.size() > kMaxCone) return {};
    for (Value* in : n->inputs()) {
      Node* p = in->node();
      ElementwiseMatch m;
      if (p->owningBlock() == block && p->outputs().size() == 1 && p->kind() != c10::prim::Constant &&
          matchElementwise(p, m, nullptr))
        todo.push_back(p);
    }
  }
  std::sort(cone.begin(), cone.end(), [](Node* a, Node* b) { return a->isBefore(b); });
  return cone;
}

class SinkIntoBranchesPattern : public Pattern {
 public:
  SinkIntoBranchesPattern() : Pattern("sink_into_branches", WalkOrder::Reverse, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    ElementwiseMatch m;
    if (n->outputs().size() != 1 || !matchElementwise(n, m, nullptr)) return false;
    Value* v = n->output();
    std::vector<torch::jit::Use> sunk;
    for (const auto& use : v->uses()) {
      if (isMetadataRead(use.user)) continue;
      if (use.user->owningBlock() == n->owningBlock()) return false;  // read for its values here: computed here
      ReductionMatch r;
      if (!matchReduction(use.user, r, nullptr)) return false;
      sunk.push_back(use);
    }
    if (sunk.empty()) return false;
    const std::vector<Node*> cone = coneOf(v);
    if (cone.empty()) return rw.notifyMatchFailure({n}, "more than 32 elementwise ops compute it");
    std::vector<Value*> operands;
    std::unordered_set<Node*> inCone(cone.begin(), cone.end());
    for (Node* c : cone)
      for (Value* in : c->inputs())
        if (!inCone.count(in->node()) && std::find(operands.begin(), operands.end(), in) == operands.end())
          operands.push_back(in);
    for (const auto& use : sunk) {
      Node* top = ancestorIn(use.user, n->owningBlock());
      if (!top || !onlyBranchesBetween(use.user, top))
        return rw.notifyMatchFailure({n, use.user}, "its reduction " + describeNode(use.user) +
                                                        " runs in a loop body: each iteration would compute it");
      if (std::string scope = gradScopeBoundary(n, top); !scope.empty())
        return rw.notifyMatchFailure({n, use.user}, "the value and its reduction in a branch: " + scope);
      if (std::string hazard = readHazard(operands, cone.front(), top, rw.aliasDb()); !hazard.empty())
        return rw.notifyMatchFailure({n, use.user}, hazard);
    }

    // The graph changes from here on.
    torch::jit::Graph& g = rw.graph();
    RewriteEvent e;
    e.add(cone);
    e.fusedOp = "(copied)";
    e.reason = "the " + std::to_string(cone.size()) + " elementwise ops computing %" + v->debugName() +
               " copied into the " + std::to_string(sunk.size()) +
               " if-branch(es) whose reductions alone read its values, so each fuses there";
    Node* last = nullptr;
    for (const auto& use : sunk) {
      torch::jit::WithInsertPoint at(use.user);
      Value* copy = cloneNodes(g, cone).at(v);
      use.user->replaceInput(use.offset, copy);
      last = copy->node();
    }
    rw.notifyRewrite(std::move(e), last);
    return true;
  }
};

}  // namespace

bool SinkIntoBranches(std::shared_ptr<torch::jit::Graph>& graph) {
  SinkIntoBranchesPattern p;
  return runPattern(graph, p);
}

}  // namespace tsfuse
