#include "passes/chain_fused_reductions.h"

#include "kernels/runtime/chain.h"
#include "passes/analysis/grad_scope.h"
#include "passes/analysis/read_hazards.h"
#include "passes/framework/driver.h"
#include "passes/regions/fused_values.h"
#include "passes/regions/rewrite.h"
#include "passes/regions/sweep_readers.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>

namespace tsfuse {
namespace {

using torch::jit::Value;

// The consumer's operand that is a fused reduction's value, and that reduction's stages.
struct Producer {
  size_t operand = 0;
  Unsqueezed view;
  Stages stages;
};

// An operand 0-dim by construction (a cast's prototype, a number read at run time): it spans nothing.
bool zeroDimByConstruction(Value* v) {
  Node* n = v->node();
  if (n->kind() == c10::Symbol::fromQualString("tsfuse::wrapped_number")) return true;
  const std::optional<c10::IValue> size =
      n->kind() == c10::aten::empty ? torch::jit::toIValue(n->input(0)) : std::nullopt;
  return size && size->isIntList() && size->toIntList().empty();
}

// A sibling of the consumer among its epilogue's operands: a tsfuse::reduce over the same dims
// whose expression reads every operand the consumer's expression reads, so that its value spans
// the consumer's (yolov5's areas, products over [N, 1, 2] and [1, M, 2], are not siblings of the
// intersection's over [N, M, 2]: chaining them would save nothing).
std::optional<Producer> siblingInEpilogue(const FusedReduction& consumer, Node* list, size_t exprInputs) {
  const std::vector<Value*> reads(list->inputs().begin(),
                                  list->inputs().begin() + std::min(exprInputs, list->inputs().size()));
  for (size_t k = exprInputs; k < list->inputs().size(); ++k) {
    Value* v = list->input(k);
    if (v->node()->kind() != kReduceOp) continue;
    std::optional<FusedReduction> r = fusedReductionOf(v->node());
    std::optional<Stages> s = stagesOf(v->node());
    if (!r || !s || r->spec.dims != consumer.spec.dims || r->spec.keepdim != consumer.spec.keepdim) continue;
    const auto exprInputsOf = static_cast<size_t>(cachedExpr(r->expr)->numInputs);
    const auto first = s->list->inputs().begin();
    const std::vector<Value*> its(first, first + std::min(exprInputsOf, s->list->inputs().size()));
    const bool spans = std::all_of(reads.begin(), reads.end(), [&](Value* x) {
      return zeroDimByConstruction(x) || std::find(its.begin(), its.end(), x) != its.end();
    });
    if (spans) return Producer{k, unsqueezedValue(v), std::move(*s)};
  }
  return std::nullopt;
}

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
//
// A sibling: a tsfuse::reduce over the same dims whose value the consumer's epilogue reads (the
// overlap mask's product times the intersection's in YOLOX's IoU) is stage 0 the same way, its
// value an epilogue operand of the fused stage:
//
//   %m = tsfuse::reduce(%l1, "v1: ...; lt(%0, %1); to(...)", "prod", [2], False, None, None, [])  [N, M]
//   %o = tsfuse::reduce([%a, %b, %m, ...], "v1: ...; sub(%1, %0)", "prod", [2], False, None,
//                       "v1: mul($0, $1); ...", [])                                               [N, M]
// =>
//   %o = tsfuse::reduce_chain([...], "v1: ...; lt(%0, %1); to(...)",
//          ["prod(dim=[2], keepdim=False)",
//           "fused(v1: ...; sub(%1, %0); $2 = value) |> prod(dim=[2], keepdim=False) |> v1: mul($0, $1); ..."])
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
    if (!p) p = siblingInEpilogue(*r, list, static_cast<size_t>(exprInputs));
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
               "last stage" +
               (p->operand >= static_cast<size_t>(exprInputs) ? ", whose epilogue reads it" : std::string()) +
               ": its value " + name + " is computed slab by slab, never stored";
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
