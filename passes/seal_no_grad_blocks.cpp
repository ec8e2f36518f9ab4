#include "passes/seal_no_grad_blocks.h"

#include "passes/analysis/grad_scope.h"

#include <vector>

namespace tsfuse {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

namespace {

bool seal(Block* block) {
  bool changed = false;
  for (Node* n : block->nodes()) {
    for (Block* sub : n->blocks()) changed |= seal(sub);
    Node* exit = noGradBlockExit(n);
    if (!exit) continue;
    std::vector<Value*> escaping;
    for (Node* m = n->next(); m != exit; m = m->next())
      for (Value* v : m->outputs())
        if (v->type()->cast<c10::TensorType>() && readAfter(v, exit)) escaping.push_back(v);
    for (auto it = escaping.rbegin(); it != escaping.rend(); ++it) {
      Value* v = *it;
      Node* d = block->owningGraph()->create(c10::aten::detach, {v});
      d->insertAfter(exit);
      d->output()->setType(v->type());
      d->copyMetadata(exit);
      v->replaceAllUsesAfterNodeWith(d, d->output());
      changed = true;
    }
  }
  return changed;
}

}  // namespace

bool SealNoGradBlocks(std::shared_ptr<torch::jit::Graph>& graph) { return seal(graph->block()); }

}  // namespace tsfuse
