// decompose (passes/decompose.h): one rewrite, table-driven.
//
//   %d = aten::pairwise_distance(%a, %b, %p, %eps, %keep)
//     =>  %s = aten::sub(%a, %b, 1)
//         %e = aten::add(%s, %eps, 1)
//         %d = aten::linalg_vector_norm(%e, %p, [-1], %keep, None)
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

class DecomposePattern : public Pattern {
 public:
  DecomposePattern() : Pattern("decompose", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    const Decomposition* d = decompositionOf(n);
    if (!d) return false;
    std::string why;
    if (!d->applies(n, &why)) return rw.notifyMatchFailure({n}, describeNode(n) + " kept whole: " + why);
    torch::jit::Graph& g = rw.graph();
    torch::jit::WithInsertPoint guard(n);
    std::unordered_map<torch::jit::Value*, torch::jit::Value*> map;
    const std::vector<torch::jit::Value*> outs = torch::jit::insertGraph(g, *d->graph, n->inputs(), map);
    for (const auto& [callee, inserted] : map)
      if (callee->node()->kind() != c10::prim::Param) inserted->node()->setSourceRange(n->sourceRange());
    TORCH_INTERNAL_ASSERT(outs.size() == n->outputs().size());
    for (size_t i = 0; i < outs.size(); ++i) {
      outs[i]->setType(n->output(i)->type());
      rw.replaceAllUsesWith(n->output(i), outs[i]);
    }
    // No event: a decomposition is not a fusion; the fused op made of it reports its nodes.
    TSFUSE_LOG(pass, debug, "decompose: ", describeNode(n), " into the ATen calls its kernel makes");
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
