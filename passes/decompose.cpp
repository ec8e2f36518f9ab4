// decompose (passes/decompose.h): one rewrite, table-driven.
//
//   %d = aten::pairwise_distance(%a, %b, %p, %eps, %keep)
//     =>  %s = aten::sub(%a, %b, 1)
//         %e = aten::add(%s, %eps, 1)
//         %d = aten::linalg_vector_norm(%e, %p, [-1], %keep, None)
//
// A guarded entry keeps the op for the inputs its guard refuses:
//
//   %r = aten::matmul(%w, %xe)
//     =>  %ok : bool = tsfuse::product_sums(%w, %xe)
//         %r = prim::If(%ok)
//           block0(): ... aten::sum(aten::mul(...), [-2], False, None) -> (...)
//           block1(): %m = aten::matmul(%w, %xe) -> (%m)
//
// The inserted nodes carry the op's source range, so reports point at the user's line. Only a
// kept op is an event (a rejection, with why); a decomposition is not a fusion.
#include "passes/decompose.h"

#include "passes/analysis/decompositions.h"
#include "passes/framework/driver.h"
#include "tsfuse/log.h"

#include <unordered_map>

namespace tsfuse {
namespace {

// The op the graph keeps where a guarded entry's guard is false: the second block of the prim::If
// over that guard.
bool keptByGuard(Node* n, const Decomposition* d) {
  Node* owner = n->owningBlock()->owningNode();
  return d->guard && owner && owner->kind() == c10::prim::If && owner->blocks().size() == 2 &&
         owner->blocks()[1] == n->owningBlock() &&
         owner->input(0)->node()->kind() == c10::Symbol::fromQualString(d->guard);
}

// The entry's graph inlined at the insertion point, over n's arguments; its outputs.
std::vector<torch::jit::Value*> insertDecomposition(torch::jit::Graph& g, const Decomposition& d, Node* n) {
  std::unordered_map<torch::jit::Value*, torch::jit::Value*> map;
  std::vector<torch::jit::Value*> outs = torch::jit::insertGraph(g, *d.graph, n->inputs(), map);
  for (const auto& [callee, inserted] : map)
    if (callee->node()->kind() != c10::prim::Param) inserted->node()->setSourceRange(n->sourceRange());
  return outs;
}

class DecomposePattern : public Pattern {
 public:
  DecomposePattern() : Pattern("decompose", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    std::string why;
    const Decomposition* d = decompositionOf(n, &why);
    if (!d) return why.empty() ? false : rw.notifyMatchFailure({n}, describeNode(n) + " kept whole: " + why);
    if (keptByGuard(n, d)) return false;
    torch::jit::Graph& g = rw.graph();
    torch::jit::WithInsertPoint at(n);
    std::vector<torch::jit::Value*> outs;
    if (!d->guard) {
      outs = insertDecomposition(g, *d, n);
    } else {
      Node* check = g.insertNode(g.create(c10::Symbol::fromQualString(d->guard), n->inputs(), 1));
      check->output()->setType(c10::BoolType::get());
      check->setSourceRange(n->sourceRange());
      Node* branch = g.insertNode(g.create(c10::prim::If, {check->output()}, n->outputs().size()));
      branch->setSourceRange(n->sourceRange());
      torch::jit::Block* decomposed = branch->addBlock();
      torch::jit::Block* kept = branch->addBlock();
      {
        torch::jit::WithInsertPoint inside(decomposed);
        for (torch::jit::Value* v : insertDecomposition(g, *d, n)) decomposed->registerOutput(v);
      }
      Node* whole = kept->appendNode(g.createClone(n, [](torch::jit::Value* v) { return v; }));
      for (torch::jit::Value* v : whole->outputs()) kept->registerOutput(v);
      outs.assign(branch->outputs().begin(), branch->outputs().end());
    }
    TORCH_INTERNAL_ASSERT(outs.size() == n->outputs().size());
    for (size_t i = 0; i < outs.size(); ++i) {
      outs[i]->setType(n->output(i)->type());
      rw.replaceAllUsesWith(n->output(i), outs[i]);
    }
    // No event: a decomposition is not a fusion; the fused op made of it reports its nodes.
    TSFUSE_LOG(pass, debug, "decompose: ", describeNode(n),
               d->guard ? " into its decomposition, guarded by " : " into the ATen calls its kernel makes",
               d->guard ? d->guard : "");
    rw.erase(n);
    return true;
  }
};

}  // namespace

bool Decompose(std::shared_ptr<torch::jit::Graph>& graph) {
  DecomposePattern p;
  return runPattern(graph, p);
}

}  // namespace tsfuse
