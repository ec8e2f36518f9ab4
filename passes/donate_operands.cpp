#include "passes/donate_operands.h"

#include "passes/driver.h"
#include "tsfuse/log.h"

#include <c10/util/irange.h>

namespace tsfuse {
namespace {

using torch::jit::Value;

// donate_operands: an operand whose only reader is the fused op is given to it
//
//   %d = aten::cdist(%x, %y)                     %d = aten::cdist(%x, %y)
//   %l = prim::ListConstruct(%d, %w)       =>    %l = prim::ListConstruct(%d, %w)
//   %r = tsfuse::reduce(%l, ..., %none)          %r = tsfuse::reduce(%l, ..., [0])
//
// (%d may also be an in-place op's result over such a tensor: d = cdist(x, y).clamp_min_(0).)
//
// The unfused graph frees %d after its last reader; the fused op, holding its operand list to the
// end, would keep %d alive next to its output (gp.PeriodicKernel: one [D, N, M] more than the
// unfused graph). Donated, the op may write its elementwise value over %d.
// NB: the graph's word is necessary, not sufficient: a later pass (the executor's CSE) may give
// %d a new reader, so the op also checks at run time that nothing else holds the tensor
// (kernels/fused_call.h, takeDonated). Neither alone would be sound: a C++ caller may own the
// operand list, which no reference count can tell from the interpreter's.
class DonateOperandsPattern : public Pattern {
 public:
  DonateOperandsPattern() : Pattern("donate_operands", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    const std::string kind = n->kind().toQualString();
    if (kind != "tsfuse::pairwise" && kind != "tsfuse::reduce") return false;
    auto slot = n->schema().argumentIndexWithName("donated");
    if (!slot) return false;
    Node* list = n->input(0)->node();
    if (list->kind() != c10::prim::ListConstruct || list->owningBlock() != n->owningBlock() ||
        n->input(0)->uses().size() != 1)
      return skip(n, "its operand list is not a list built for it alone");
    std::vector<int64_t> donated;
    for (const auto i : c10::irange(list->inputs().size())) {
      std::string why = notDonatable(list->input(i), n);
      if (why.empty()) donated.push_back(static_cast<int64_t>(i));
      else skip(n, "operand " + std::to_string(i) + " kept: " + why);
    }
    Value* current = n->input(*slot);
    auto ivalue = torch::jit::toIValue(current);
    if (ivalue && ivalue->isIntList() && ivalue->toIntVector() == donated) return false;
    torch::jit::WithInsertPoint guard(n);
    n->replaceInput(*slot, rw.graph().insertConstant(c10::IValue(donated)));
    if (current->uses().empty() && current->node()->kind() == c10::prim::Constant) rw.erase(current->node());
    rw.keepAliasDb();  // only an int list changed
    return true;
  }

 private:
  // Why `v` may be read after `n` or share memory with a value that may, or "".
  static std::string notDonatable(Value* v, Node* n) {
    if (!v->type()->cast<c10::TensorType>()) return "not a tensor";
    if (v->uses().size() != 1) return "%" + v->debugName() + " has other readers";
    // The result of an in-place op is its self's memory (gpytorch: matmul(...).clamp_min_(0)):
    // follow it to where that memory was made, each link read by nothing but the next.
    while (Node* w = inPlaceWriter(v)) {
      if (w->owningBlock() != n->owningBlock()) return "%" + v->debugName() + " is made in another block";
      Value* self = w->input(0);
      if (self->uses().size() != 1) return "%" + self->debugName() + " is also read besides its in-place write";
      v = self;
    }
    Node* producer = v->node();
    if (producer->kind() == c10::prim::Param || producer->kind() == c10::prim::Constant)
      return "%" + v->debugName() + " is an input or a constant";
    // One made outside n's block (before a loop, say) is read again on each pass through it.
    if (producer->owningBlock() != n->owningBlock()) return "%" + v->debugName() + " is made in another block";
    // Its schema says the output is new memory, and alias analysis takes the op at its word
    // (AliasDb itself cannot say: every tensor in a fused op's list may alias every other).
    const c10::FunctionSchema* schema = producer->maybeSchema();
    const auto op = producer->maybeOperator();
    if (!schema || !op || schema->is_mutable() || op->aliasAnalysisKind() != c10::AliasAnalysisKind::FROM_SCHEMA)
      return "%" + v->debugName() + " comes from an op without a pure schema";
    for (const auto& r : schema->returns())
      if (r.alias_info()) return "%" + v->debugName() + " may be a view of " + producer->kind().toQualString() + "'s input";
    return "";
  }

  // The node when `v` is the result of an in-place op on its first argument (`Tensor(a!) self ->
  // Tensor(a!)`), else nullptr.
  static Node* inPlaceWriter(Value* v) {
    Node* w = v->node();
    const c10::FunctionSchema* s = w->maybeSchema();
    if (!s || s->returns().size() != 1 || s->arguments().empty() || w->inputs().empty()) return nullptr;
    const c10::AliasInfo* out = s->returns()[0].alias_info();
    const c10::AliasInfo* self = s->arguments()[0].alias_info();
    if (!out || !self || !out->isWrite() || !self->isWrite() || out->beforeSets() != self->beforeSets()) return nullptr;
    return w;
  }

  static bool skip(Node* n, const std::string& why) {
    TSFUSE_LOG(pass, debug, "donate_operands: ", n->kind().toQualString(), " ", why);
    return false;
  }
};

}  // namespace

bool DonateOperands(std::shared_ptr<torch::jit::Graph>& graph) {
  DonateOperandsPattern pattern;
  return runPattern(graph, pattern);
}

}  // namespace tsfuse
