#include "passes/donate_operands.h"

#include "passes/framework/driver.h"
#include "tsfuse/log.h"

#include <c10/util/irange.h>

namespace tsfuse {
namespace {

using torch::jit::Value;

// donate_operands: an operand the fused op reads last is given to it
//
//   %d = aten::cdist(%x, %y)                     %d = aten::cdist(%x, %y)
//   %l = prim::ListConstruct(%d, %w)       =>    %l = prim::ListConstruct(%d, %w)
//   %r = tsfuse::reduce(%l, ..., [])             %r = tsfuse::reduce(%l, ..., [0, 1])
//
// The unfused graph frees %d after its last reader; the fused op, holding its operand list to the
// end, would keep %d alive next to its output. Donated, the op may write its elementwise value
// over %d.
// `donated` says only that no node after the op reads the value: whether its memory is free to
// take is a run-time question (kernels/runtime/donation.h, takeDonated), since what holds it depends on
// the caller (an input %w, a view of a live tensor, an alias an op returns, the executor's CSE
// giving %d a later reader): the op takes a tensor only when nothing but the call holds it or
// its memory. Neither alone would be sound: a C++ caller may own an operand list, which no
// reference count tells from the interpreter's.
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
      if (why.empty())
        donated.push_back(static_cast<int64_t>(i));
      else
        skip(n, "operand " + std::to_string(i) + " kept: " + why);
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
  // Why a node after `n` may read `v`, or "". Readers before n are no obstacle: what they keep of
  // v at run time (a view, say) the run-time check sees.
  static std::string notDonatable(Value* v, Node* n) {
    if (!v->type()->cast<c10::TensorType>()) return "not a tensor";
    if (v->node()->kind() == c10::prim::Constant) return "%" + v->debugName() + " is a constant";
    // One made outside n's block (before a loop, say) is read again on each pass through it.
    if (v->node()->owningBlock() != n->owningBlock()) return "%" + v->debugName() + " is made in another block";
    for (const torch::jit::Use& u : v->uses()) {
      Node* at = ancestorIn(u.user, n->owningBlock());  // the reader, or the node holding it
      if (u.user != n->input(0)->node() && (!at || !at->isBefore(n)))
        return "%" + v->debugName() + " is read after it (by " + describeNode(u.user) + ")";
    }
    return "";
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
