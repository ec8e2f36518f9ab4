// count_bool_sums (passes/count_bool_sums.h):
//
//   %m = aten::__and__(%a, %b)               (also read by a fused op's region: stored)
//   %n = aten::sum(%m, None)         =>      %n = aten::count_nonzero(%m)
#include "passes/count_bool_sums.h"

#include "passes/analysis/shape_facts.h"
#include "passes/framework/driver.h"

#include <torch/csrc/jit/ir/constants.h>

namespace tsfuse {
namespace {

using torch::jit::Node;

class CountBoolSumsPattern : public Pattern {
 public:
  CountBoolSumsPattern() : Pattern("count_bool_sums", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    if (!n->matches("aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor")) return false;
    const std::optional<c10::IValue> dtype = torch::jit::toIValue(n->input(1));
    if (!dtype || !dtype->isNone() || !provablyBool(n->input(0))) return false;
    torch::jit::Graph& g = rw.graph();
    torch::jit::WithInsertPoint at(n);
    Node* count = g.insertNode(
        g.create(c10::Symbol::fromQualString("aten::count_nonzero"), {n->input(0), g.insertConstant(c10::IValue())}));
    count->output()->setType(n->output()->type());
    count->setSourceRange(n->sourceRange());
    RewriteEvent e;
    e.add(n);
    e.reason = "sum of a stored bool value -> its count_nonzero (no int64 copy of it)";
    e.fusedOp = "aten::count_nonzero";
    rw.notifyRewrite(std::move(e), count);
    rw.replaceAllUsesWith(n->output(), count->output());
    rw.erase(n);
    return true;
  }
};

}  // namespace

bool CountBoolSums(std::shared_ptr<torch::jit::Graph>& graph) {
  CountBoolSumsPattern p;
  return runPattern(graph, p);
}

}  // namespace tsfuse
