// native_extrema (passes/native_extrema.h): max/min and argmax/argmin along one dim, left unfused,
// run by the fused reduction kernels where ATen's are slow.
#include "passes/native_extrema.h"

#include "passes/analysis/shape_facts.h"
#include "passes/framework/driver.h"

namespace tsfuse {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

bool isArgExtremum(Node* n) {
  return (n->kind() == c10::aten::argmax || n->kind() == c10::aten::argmin) && n->inputs().size() == 3;
}

// native_extrema: an unfused max/min(dim) or argmax/argmin(dim) -> its tsfuse form
//
//   %v, %i = aten::max(%iou, 0, False)      =>    %v, %i = tsfuse::extremum(%iou, 0, False, True)
//   %a = aten::argmin(%d, 1, False)         =>    %a = tsfuse::arg_extremum(%d, 1, False, False)
//
// The walk runs after fusion: what a fused region took is gone. An argmax/argmin whose dim is None
// (over the flattened tensor) or not known to be an int keeps ATen's.
class NativeExtremaPattern : public Pattern {
 public:
  NativeExtremaPattern() : Pattern("native_extrema", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    const bool withIndices = isMinMaxDim(n);
    if (!withIndices && !isArgExtremum(n)) return false;
    Value* dim = n->input(1);
    if (!withIndices && dim->type()->kind() != c10::TypeKind::IntType)
      return rw.notifyMatchFailure({n}, "the dim of " + std::string(n->kind().toQualString()) +
                                            " is not known to be an int (None reduces the flattened tensor)");
    const bool isMax = n->kind() == c10::aten::max || n->kind() == c10::aten::argmax;
    Graph& graph = rw.graph();
    torch::jit::WithInsertPoint guard(n);
    const char* op = withIndices ? "tsfuse::extremum" : "tsfuse::arg_extremum";
    Node* r = graph.insertNode(graph.create(c10::Symbol::fromQualString(op),
                                            {n->input(0), dim, n->input(2), graph.insertConstant(isMax)},
                                            n->outputs().size()));
    r->setSourceRange(n->sourceRange());
    RewriteEvent e;
    e.add(n);
    e.reason = std::string(n->kind().toUnqualString()) +
               "(dim) left unfused -> the fused kernels for a large float CPU tensor (ATen's loop walks each "
               "output's values one by one), ATen's otherwise";
    e.fusedOp = op;
    for (size_t k = 0; k < n->outputs().size(); ++k) {
      r->output(k)->setType(n->output(k)->type());
      rw.replaceAllUsesWith(n->output(k), r->output(k));
    }
    rw.notifyRewrite(std::move(e), r);
    rw.erase(n);
    rw.keepAliasDb();  // fresh results in place of fresh results
    return true;
  }
};

}  // namespace

bool NativeExtrema(std::shared_ptr<Graph>& graph) {
  NativeExtremaPattern pattern;
  return runPattern(graph, pattern);
}

}  // namespace tsfuse
