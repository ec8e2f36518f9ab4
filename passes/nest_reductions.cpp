#include "passes/nest_reductions.h"

#include "kernels/runtime/chain.h"
#include "kernels/runtime/sweep.h"
#include "passes/analysis/grad_scope.h"
#include "passes/analysis/op_table.h"
#include "passes/analysis/read_hazards.h"
#include "passes/framework/driver.h"
#include "passes/regions/epilogue.h"
#include "passes/regions/fused_values.h"
#include "passes/regions/rewrite.h"
#include "passes/regions/softmax_region.h"
#include "passes/regions/sweep_readers.h"

#include <algorithm>

namespace tsfuse {
namespace {

constexpr const char* kEveryDim =
    " reduces every dim of the fused reduction's value: no dim is left to compute it slab by slab";

// Why `reduction` (of a fused reduction's value) may not nest, or "". One over every dim nests
// only as a sweep's branch that folds slab partials (sum, mean, amax, amin, any, all).
std::string nestHazard(Node* reduction, const ReductionMatch& rm) {
  if (reducesEveryDim(rm) && (!foldsAcrossSlabs(rm.spec) || rm.spec.withIndices()))
    return std::string(reduction->kind().toQualString()) + kEveryDim +
           " and its partials do not fold, so the value would be stored whole anyway";
  return "";
}

// reduction(tsfuse::reduce(...))  =>  tsfuse::reduce_chain(...)
//
//   %l = prim::ListConstruct(%x, %y)
//   %d = tsfuse::reduce(%l, "v1: sub($0, $1); mul(%0, %0)", "sum", [2], False, None, None, [])
//   %i = aten::argmin(%d, 1, False)
// =>
//   %i = tsfuse::reduce_chain(%l, "v1: sub($0, $1); mul(%0, %0)",
//                             ["sum(dim=[2], keepdim=False)", "argmin(dim=[1], keepdim=False)"])
//
// An elementwise chain consuming the new stage's value alone joins as its epilogue. Where the
// fused reduction's value has several uses, each a reduction that may nest, this one gets its own
// copy of the fused reduction (it sweeps the broadcast space once more instead of storing the
// value), unless they are all plain reductions: then one tsfuse::reduce_sweep computes them all
// (Chamfer's row and column minima).
class NestReductionsPattern : public Pattern {
 public:
  NestReductionsPattern() : Pattern("nest_reductions", WalkOrder::Forward, NestedBlocks::First) {}

  bool matchAndRewrite(Node* reduction, Rewriter& rw) override {
    if (isSoftmax(reduction)) return nestSoftmax(reduction, rw);
    if (std::optional<bool> nested = nestDivSum(reduction, rw)) return *nested;
    ReductionMatch rm;
    if (!matchReduction(reduction, rm, nullptr)) return false;
    // A traced `.squeeze()` between the reductions (kmeans-pytorch's pairwise_distance) becomes
    // the stage's first step.
    Node* squeeze = rm.input->node();
    if (squeeze->kind() != c10::aten::squeeze || squeeze->inputs().size() != 1) squeeze = nullptr;
    Value* value = squeeze ? squeeze->input() : rm.input;
    Node* inner = value->node();
    std::optional<Stages> stages = stagesOf(inner);
    if (!stages) return false;  // not a fused reduction's value: fuse_broadcast_reduce's business
    std::string scope = gradScopeBoundary(inner, reduction);
    if (scope.empty() && squeeze) scope = gradScopeBoundary(squeeze, reduction);
    if (!scope.empty())
      return rw.notifyMatchFailure({reduction, inner}, "the fused reduction and its reader: " + scope);
    if (squeeze && value->uses().size() != 1)
      return rw.notifyMatchFailure({reduction, inner},
                                   "the fused reduction's value %" + value->debugName() +
                                       " is also used besides its squeeze(), so it is stored anyway");
    if (std::string why = nestHazard(reduction, rm); !why.empty())
      return rw.notifyMatchFailure({reduction, inner}, why);
    if (!squeeze && stages->texts.size() == 1 && hasFusedReader(rm.input)) {
      std::string why;
      std::optional<SweepPlan> plan = planSweep(rm.input, inner, *stages, rw, &why);
      if (!plan) return rw.notifyMatchFailure({reduction, inner}, why);
      rewriteSweep(rw, *plan);
      return true;
    }
    // Readers of a tsfuse::reduce's value's metadata alone read a stand-in (rewrite.h).
    const bool standIn = !squeeze && inner->kind() == kReduceOp;
    auto metadataOnly = [&](Node* user) { return standIn && isMetadataRead(user); };
    std::vector<Node*> metadataReaders;
    for (const auto& use : rm.input->uses())
      if (metadataOnly(use.user)) metadataReaders.push_back(use.user);
    for (const auto& use : rm.input->uses()) {
      if (metadataOnly(use.user)) continue;
      ReductionMatch other;
      if (!sameGradScope(use.user, reduction) || !matchReduction(use.user, other, nullptr) ||
          !nestHazard(use.user, other).empty())
        return rw.notifyMatchFailure({reduction, inner}, "the fused reduction's value %" + rm.input->debugName() +
                                                             " is also used by " + describeNode(use.user) +
                                                             ", so it is stored anyway");
    }
    std::vector<Value*> operands(stages->list->inputs().begin(), stages->list->inputs().end());
    // A reduction over every dim nests only as a sweep's folding branch.
    bool everyDim = false;
    for (const auto& use : rm.input->uses()) {
      ReductionMatch other;
      if (!metadataOnly(use.user) && matchReduction(use.user, other, nullptr)) everyDim |= reducesEveryDim(other);
    }
    const std::string everyDimWhy = "a reduction of %" + rm.input->debugName() + kEveryDim +
                                    ", and only a sweep over a tsfuse::reduce's value folds its slab partials";
    if (everyDim && (squeeze || stages->texts.size() != 1))
      return rw.notifyMatchFailure({reduction, inner}, everyDimWhy);
    if (!squeeze && (rm.input->uses().size() > 1 || everyDim) && stages->texts.size() == 1) {
      // One sweep for all the reductions of a tsfuse::reduce's value (a sweep's branches all read
      // stage 0's), when each has one output (not max/min with indices).
      std::string why;
      if (auto plan = planSweep(rm.input, inner, *stages, rw, &why)) {
        rewriteSweep(rw, *plan);
        return true;
      }
      if (everyDim) return rw.notifyMatchFailure({reduction, inner}, everyDimWhy + "; " + why);
    }

    Epilogue epi;
    if (!rm.spec.withIndices()) epi = planEpilogue(reduction->output());
    std::string epiHazard;
    if (!epi.chain.empty()) {
      std::vector<Value*> read = operands;
      read.insert(read.end(), epi.extra.begin(), epi.extra.end());
      epiHazard = readHazard(read, earlier(inner, epi.chain.front()), epi.chain.back(), rw.aliasDb());
      if (!epiHazard.empty()) epi = Epilogue{};
    }
    Node* end = epi.chain.empty() ? reduction : epi.chain.back();
    if (std::string why = readHazard(operands, inner, end, rw.aliasDb()); !why.empty())
      return rw.notifyMatchFailure({reduction, inner}, why);

    // The graph changes from here on.
    ReduceSpec spec = rm.spec;
    if (!epi.chain.empty()) spec.epilogue = std::make_shared<const Expr>(epi.expr);
    stages->texts.push_back((squeeze ? "squeeze() |> " : "") + describe(spec));
    RewriteEvent e;
    e.add(inner);
    if (squeeze) e.add(squeeze);
    e.add(reduction).add(epi.chain);
    e.fusedOp = rm.spec.withIndices() ? "tsfuse::reduce_chain_with_indices" : "tsfuse::reduce_chain";
    e.expr = stages->expr;
    for (const auto& t : stages->texts) e.expr += " |> " + t;
    e.reason = std::string("nested ") + reduction->kind().toQualString() + " into the fused reduction: its value %" +
               rm.input->debugName() + " is computed slab by slab, never stored";
    if (!epi.chain.empty()) e.reason += "; epilogue of " + std::to_string(epi.chain.size()) + " elementwise ops";
    if (!epiHazard.empty()) e.reason += "; epilogue not fused: " + epiHazard;
    if (rm.input->uses().size() > 1)
      e.reason += "; the fused reduction is recomputed for each of the " + std::to_string(rm.input->uses().size()) +
                  " reductions of %" + rm.input->debugName() + " (one more sweep each instead of storing it)";

    operands.insert(operands.end(), epi.extra.begin(), epi.extra.end());
    const bool indices = rm.spec.withIndices();
    Node* chain = insertStagedOp(rw.graph(), indices ? kChainIndicesOp : kChainOp, indices ? 2 : 1, operands,
                                 stages->expr, stages->texts, end);
    if (epi.chain.empty()) {
      for (size_t i = 0; i < chain->outputs().size(); ++i) {
        chain->output(i)->setType(reduction->output(i)->type());
        rw.replaceAllUsesWith(reduction->output(i), chain->output(i));
      }
    } else {
      chain->output()->setType(end->output()->type());
      rw.replaceAllUsesWith(end->output(), chain->output());
    }
    for (auto it = epi.chain.rbegin(); it != epi.chain.rend(); ++it) rw.erase(*it);
    rw.erase(reduction);
    if (squeeze && !squeeze->hasUses()) rw.erase(squeeze);
    if (inner->output()->uses().size() == metadataReaders.size())
      readReducedMetadataFromStandIn(rw.graph(), inner, metadataReaders);
    if (!inner->hasUses()) eraseFusedOp(rw, inner);
    rw.notifyRewrite(std::move(e), chain);
    return true;
  }
};

}  // namespace

bool NestReductions(std::shared_ptr<Graph>& graph) {
  NestReductionsPattern pattern;
  return runPattern(graph, pattern);
}

}  // namespace tsfuse
