#include "passes/snapshot_written_operands.h"

#include "passes/analysis/op_table.h"
#include "passes/framework/driver.h"
#include "tsfuse/log.h"

#include <c10/util/irange.h>

namespace tsfuse {
namespace {

using torch::jit::AliasDb;
using torch::jit::Value;

const c10::Symbol kSavedOperand = c10::Symbol::fromQualString("tsfuse::saved_operand");
const c10::Symbol kShapeOf = c10::Symbol::fromQualString("tsfuse::shape_of");

// snapshot_written_operands: an operand written after the fused op that reads it is read through
// tsfuse::saved_operand
//
//   %l = prim::ListConstruct(%v, %w)            %p = prim::ListConstruct(%v, %w)
//   %r = tsfuse::reduce(%l, ...)          =>    %s = tsfuse::saved_operand(%v, %p)
//   %u = aten::neg_(%v)                         %l = prim::ListConstruct(%s, %w)
//                                               %r = tsfuse::reduce(%l, ...)
//                                               %u = aten::neg_(%v)
//
// With a gradient, a fused op saves its operands and its backward recomputes from them
// (kernels/runtime/fused_grad.h), where eager saves only what each op's backward reads: a later
// in-place write to an operand (one canonicalize could not make out-of-place: a view of an input,
// a value with aliases) would make the fused backward raise where eager's need not. Where the op
// will save its operands (grad mode, an operand %p that requires grad) saved_operand copies the
// operand (operand-sized, as the inputs are: no broadcast), so the write reaches the original
// alone; otherwise it is the operand itself and costs nothing.
class SnapshotWrittenOperandsPattern : public Pattern {
 public:
  SnapshotWrittenOperandsPattern() : Pattern("snapshot_written_operands", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    // Fused ops (their operand list first); shape_of reads its operands' metadata alone.
    if (!isTsfuseOp(n) || n->kind() == kShapeOf || n->inputs().empty()) return false;
    Node* list = n->input(0)->node();
    if (list->kind() != c10::prim::ListConstruct) return false;
    std::vector<size_t> written;
    for (const auto i : c10::irange(list->inputs().size())) {
      Value* v = list->input(i);
      if (v->type()->cast<c10::TensorType>() && v->node()->kind() != kSavedOperand && writtenAfter(v, n, rw.aliasDb()))
        written.push_back(i);
    }
    if (written.empty()) return false;
    torch::jit::WithInsertPoint guard(list);
    // The op's operands as they are, for saved_operand to see whether any requires grad.
    Node* peers = rw.graph().insertNode(rw.graph().createList(c10::TensorType::get(), list->inputs()));
    for (size_t i : written) {
      Value* v = list->input(i);
      Node* copy = rw.graph().insertNode(rw.graph().create(kSavedOperand, {v, peers->output()}));
      copy->output()->setType(v->type());
      list->replaceInput(i, copy->output());
      TSFUSE_LOG(pass, debug, "snapshot_written_operands: %", v->debugName(), " of ", n->kind().toQualString(),
                 " is written after it");
    }
    return true;
  }

 private:
  // Whether a node after `n` (in its block or the blocks holding it; anywhere in a loop holding n,
  // whose next iteration comes after it) writes to `v` or an alias of it.
  static bool writtenAfter(Value* v, Node* n, AliasDb& db) {
    for (Node* at = n; at;) {
      torch::jit::Block* b = at->owningBlock();
      for (Node* m = at->next(); m != b->return_node(); m = m->next())
        if (db.writesToAlias(m, {v})) return true;
      Node* owner = b->owningNode();
      if (owner && owner->kind() == c10::prim::Loop && db.writesToAlias(owner, {v})) return true;
      at = owner;
    }
    return false;
  }
};

}  // namespace

bool SnapshotWrittenOperands(std::shared_ptr<torch::jit::Graph>& graph) {
  SnapshotWrittenOperandsPattern pattern;
  return runPattern(graph, pattern);
}

}  // namespace tsfuse
