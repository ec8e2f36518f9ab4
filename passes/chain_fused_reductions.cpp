#include "passes/chain_fused_reductions.h"

#include "kernels/runtime/chain.h"
#include "passes/analysis/grad_scope.h"
#include "passes/analysis/read_hazards.h"
#include "passes/framework/driver.h"
#include "passes/regions/fused_values.h"
#include "passes/regions/rewrite.h"
#include "passes/regions/sweep_readers.h"

namespace tsfuse {
namespace {

using torch::jit::Value;

// The consumer's operand that is a fused reduction's value, and that reduction's stages.
struct Producer {
  size_t operand = 0;
  Unsqueezed view;
  Stages stages;
};

// A fused reduction over a fused reduction's value  =>  one tsfuse::reduce_chain
//
//   %d = tsfuse::reduce([%x, %y], "v1: sub($0, $1); pow(%0, 2)", "sum", [-1], False, None,
//                       "v1: mul($0, -2.0); exp(%0)", [])                                     [N, M]
//   %u = aten::unsqueeze(%d, 2)                                                              [N, M, 1]
//   %o = tsfuse::reduce([%u, %b3], "v1: mul($0, $1)", "sum", [1], False, None, None, [])     [N, K]
// =>
//   %o = tsfuse::reduce_chain([%x, %y, %b3], "v1: sub($0, $1); pow(%0, 2)",
//          ["sum(dim=[-1], keepdim=False) |> v1: mul($0, -2.0); exp(%0)",
//           "fused(v1: mul($0, $1); $0 = value.unsqueeze(2)) |> sum(dim=[1], keepdim=False)"])
//
// sink_views' tsfuse::broadcast_unsqueeze([%d], 2, layout) counts as the unsqueeze. The value
// must be read by the consumer alone (else it is stored anyway), and the consumer must keep a dim
// of it to cut the slabs along.
class ChainFusedReductionsPattern : public Pattern {
 public:
  ChainFusedReductionsPattern() : Pattern("chain_fused_reductions", WalkOrder::Forward, NestedBlocks::First) {}

  bool matchAndRewrite(Node* consumer, Rewriter& rw) override {
    std::optional<FusedReduction> r = fusedReductionOf(consumer);
    if (!r) return false;
    Node* list = consumer->input(0)->node();
    if (list->kind() != c10::prim::ListConstruct) return false;
    const int64_t exprInputs = cachedExpr(r->expr)->numInputs;
    std::optional<Producer> p;
    for (size_t k = 0; k < static_cast<size_t>(exprInputs) && k < list->inputs().size() && !p; ++k) {
      Unsqueezed u = unsqueezedValue(list->input(k));
      std::optional<Stages> s = stagesOf(u.base->node());
      if (s) p = Producer{k, std::move(u), std::move(*s)};
    }
    if (!p) return false;  // no fused reduction's value among the expression's operands
    Node* producer = p->view.base->node();
    const std::vector<Node*> nodes{producer, consumer};
    if (std::string scope = gradScopeBoundary(producer, consumer); !scope.empty())
      return rw.notifyMatchFailure(nodes, "the fused reduction and its reader: " + scope);
    Value* operand = list->input(p->operand);
    const std::string name = "%" + p->view.base->debugName();
    if (operand->uses().size() != 1 || (!p->view.views.empty() && p->view.base->uses().size() != 1)) {
      // Read by other reductions too: one sweep computes them all where it can.
      std::string why = "the value is a chain's, not one tsfuse::reduce's";
      if (p->stages.texts.size() == 1)
        if (std::optional<SweepPlan> plan = planSweep(p->view.base, producer, p->stages, rw, &why)) {
          rewriteSweep(rw, *plan);
          return true;
        }
      return rw.notifyMatchFailure(nodes, "the fused reduction's value " + name +
                                              " is also used elsewhere, so it is stored anyway (no sweep: " + why +
                                              ")");
    }
    if (reducesEveryDim(r->spec, std::nullopt))
      return rw.notifyMatchFailure(nodes, std::string(consumer->kind().toQualString()) +
                                              " reduces every dim: no dim of " + name +
                                              " is left to compute it slab by slab");
    std::vector<Value*> operands(p->stages.list->inputs().begin(), p->stages.list->inputs().end());
    if (std::string why = readHazard(operands, producer, consumer, rw.aliasDb()); !why.empty())
      return rw.notifyMatchFailure(nodes, why);
    StageInput input;
    input.text = r->expr;
    input.value = static_cast<int64_t>(p->operand);
    input.unsqueeze = p->view.dims;
    std::vector<std::string> texts = p->stages.texts;
    texts.push_back(input.str() + " |> " + describe(r->spec));
    try {
      cachedChain(p->stages.expr, texts);
    } catch (const c10::Error& e) {
      return rw.notifyMatchFailure(nodes, std::string("the chain would be malformed: ") + e.what_without_backtrace());
    }

    // The graph changes from here on.
    for (size_t i = 0; i < list->inputs().size(); ++i)
      if (i != p->operand) operands.push_back(list->input(i));
    const bool indices = r->spec.withIndices();
    RewriteEvent e;
    e.add(producer).add(p->view.views).add(consumer);
    e.fusedOp = indices ? "tsfuse::reduce_chain_with_indices" : "tsfuse::reduce_chain";
    e.expr = p->stages.expr;
    for (const auto& t : texts) e.expr += " |> " + t;
    e.reason = "chained " + std::string(consumer->kind().toQualString()) + " after the fused reduction as its fused " +
               "last stage: its value " + name + " is computed slab by slab, never stored";
    Node* chain = insertStagedOp(rw.graph(), indices ? kChainIndicesOp : kChainOp, indices ? 2 : 1, operands,
                                 p->stages.expr, texts, consumer);
    for (size_t i = 0; i < chain->outputs().size(); ++i) {
      chain->output(i)->setType(consumer->output(i)->type());
      rw.replaceAllUsesWith(consumer->output(i), chain->output(i));
    }
    eraseFusedOp(rw, consumer);
    for (auto it = p->view.views.rbegin(); it != p->view.views.rend(); ++it) rw.erase(*it);
    eraseFusedOp(rw, producer);
    rw.notifyRewrite(std::move(e), chain);
    return true;
  }
};

}  // namespace

bool ChainFusedReductions(std::shared_ptr<Graph>& graph) {
  ChainFusedReductionsPattern pattern;
  return runPattern(graph, pattern);
}

}  // namespace tsfuse
