#include "passes/full_slice_checks.h"

#include "passes/canonicalize.h"
#include "passes/framework/driver.h"
#include "passes/analysis/op_table.h"

#include "kernels/runtime/full_slice.h"

namespace tsfuse {
namespace {

using torch::jit::Block;
using torch::jit::Graph;

// full_slice_checks: a full slice that may raise keeps its checks, not its view
//
//   %s = aten::slice(%x, 2, None, None, 1)    =>    %s = tsfuse::full_slice(%x, 2)
//   %r = tsfuse::pairwise([%s, ...], ...)           %r = tsfuse::pairwise([%s, ...], ...)
//
// aten::slice goes through the dispatcher, autograd and a new view; full_slice is one interpreter
// instruction that checks the rank. Only slices whose identity nothing observes
// (isReadOnlyFullSlice), so that x itself can stand for the view.
class FullSliceChecksPattern : public Pattern {
 public:
  FullSliceChecksPattern() : Pattern("full_slice_checks", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    if (!isReadOnlyFullSlice(n, rw.aliasDb(), /*fusedOperands=*/true)) return false;
    Graph& graph = rw.graph();
    torch::jit::WithInsertPoint guard(n);
    Node* check =
        graph.insertNode(graph.create(c10::Symbol::fromQualString(kFullSliceOp), {n->input(0), n->input(1)}, 1));
    check->output()->setType(n->output()->type());
    check->setSourceRange(n->sourceRange());
    rw.replaceAllUsesWith(n->output(), check->output());
    rw.erase(n);       // no event: the computation is unchanged
    rw.keepAliasDb();  // the check's result takes the slice's place, an alias of the same input
    return true;
  }
};

bool callsTsfuse(const Block* block) {
  for (const Node* n : block->nodes()) {
    if (isTsfuseOp(n)) return true;
    for (const Block* b : n->blocks())
      if (callsTsfuse(b)) return true;
  }
  return false;
}

}  // namespace

bool FullSliceChecks(std::shared_ptr<Graph>& graph) {
  if (!callsTsfuse(graph->block())) return false;
  FullSliceChecksPattern pattern;
  return runPattern(graph, pattern);
}

}  // namespace tsfuse
