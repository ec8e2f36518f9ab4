#include "passes/fuse_broadcast_reduce.h"

#include "passes/analysis/grad_scope.h"
#include "passes/analysis/op_table.h"
#include "passes/analysis/read_hazards.h"
#include "passes/framework/driver.h"
#include "passes/regions/epilogue.h"
#include "passes/regions/fused_values.h"
#include "passes/regions/recompute.h"
#include "passes/regions/region.h"
#include "passes/regions/region_hazards.h"
#include "passes/regions/repeats.h"
#include "passes/regions/rewrite.h"
#include "passes/regions/softmax_region.h"

#include <torch/csrc/jit/ir/constants.h>

#include <unordered_map>

namespace tsfuse {
namespace {

// True when every use of v is a reduction of v (e.g. a minimum along each dim, as in Chamfer) or
// reads only its metadata.
bool onlyReductions(Value* v) {
  for (const auto& use : v->uses()) {
    if (isMetadataRead(use.user)) continue;
    ReductionMatch m;
    if (use.offset != 0 || !sameGradScope(use.user, v->node()) || !matchReduction(use.user, m, nullptr)) return false;
  }
  return true;
}

// Why the epilogue may not join the fused op, or "".
// NB: the fused op moves to the chain's last node, so it reads the region's operands later than
// the reduction did, and the epilogue's own operands later than the chain's first nodes did: no
// write to any of them may lie between the region's first node and the chain's end.
std::string epilogueHazard(const Epilogue& epi, const Region& r, AliasDb& aliasDb) {
  std::vector<Value*> read = r.operands;
  read.insert(read.end(), epi.extra.begin(), epi.extra.end());
  return readHazard(read, earlier(r.nodes.front(), epi.chain.front()), epi.chain.back(), aliasDb);
}

// reduction_k(f(x)), reduction_j(f(x))  =>  reduction_k(f'(x)), reduction_j(f(x))
// Clones the region producing v for `reduction` alone, so each reduction fuses on its own and
// the shared broadcast value is never stored. Returns the clone of v's producer.
Node* duplicateFor(Graph& graph, Node* reduction, Value* v, const Region& r) {
  torch::jit::WithInsertPoint guard(reduction);
  Value* copy = cloneNodes(graph, r.nodes).at(v);
  reduction->replaceInputWith(v, copy);
  return copy->node();
}

// max/min with indices: (values, indices) = aten::max(region, dim, keepdim)
//   =>  (values, indices) = tsfuse::reduce_with_indices(operands, expr, "max", dim, keepdim, None)
// The fused op has two outputs, which rewriteRegion (one output) does not create.
Node* rewriteWithIndices(Rewriter& rw, Region& r, Node* reduction, const ReduceSpec& spec) {
  torch::jit::WithInsertPoint guard(reduction);
  Graph& g = rw.graph();
  Value* list = insertOperandList(g, r);
  Node* fused = g.create(c10::Symbol::fromQualString("tsfuse::reduce_with_indices"), 2);
  fused->addInput(list);
  fused->addInput(g.insertConstant(r.expr.str()));
  fused->addInput(g.insertConstant(reductionText(spec)));
  fused->addInput(g.insertConstant((*spec.dims)[0]));
  fused->addInput(g.insertConstant(spec.keepdim));
  fused->addInput(g.insertConstant(c10::IValue()));  // epilogue: passes/fold_indices_epilogue.cpp
  g.insertNode(fused);
  fused->setSourceRange(reduction->sourceRange());
  for (size_t i = 0; i < 2; ++i) {
    fused->output(i)->setType(reduction->output(i)->type());
    reduction->output(i)->replaceAllUsesWith(fused->output(i));
  }
  rw.erase(reduction);
  eraseRegionNodes(rw, r);
  return fused;
}

// epilogue: z = f(tsfuse::reduce(ops, expr, ...), w)  =>  z = tsfuse::reduce(ops + [w], expr, ..., epilogue="v1: f($0, $1)")
// The fused op moves to the chain's last node, so the reduced value is never stored. Readers of
// the reduced value's metadata alone read a stand-in where it was computed:
//   %r = tsfuse::reduce(%l, %e, "prod", ...)          %s = tsfuse::shape_of(%l, %e, "prod", ...)
//   %d = prim::dtype(%r)                       =>     %d = prim::dtype(%s)
Node* absorbEpilogue(Rewriter& rw, Node* fused, const Epilogue& epi, RewriteEvent& event) {
  Graph& g = rw.graph();
  if (size_t n = readReducedMetadataFromStandIn(g, fused, epi.metadataReaders))
    event.reason += "; " + std::to_string(n) + " reader(s) of the reduced value's metadata alone read tsfuse::shape_of";
  Node* last = epi.chain.back();
  torch::jit::WithInsertPoint guard(last);
  std::vector<Value*> operands(fused->input(0)->node()->inputs().begin(), fused->input(0)->node()->inputs().end());
  operands.insert(operands.end(), epi.extra.begin(), epi.extra.end());
  Value* list = insertTensorList(g, operands);
  Node* withEpi = g.create(fused->kind(), 1);
  withEpi->addInput(list);
  for (size_t i = 1; i <= 5; ++i) withEpi->addInput(fused->input(i));  // expr .. dtype
  withEpi->addInput(g.insertConstant(epi.expr.str()));
  withEpi->addInput(fused->input(7));  // donated: still [] (donate_operands runs last)
  g.insertNode(withEpi);
  withEpi->setSourceRange(last->sourceRange());
  withEpi->output()->setType(last->output()->type());
  last->output()->replaceAllUsesWith(withEpi->output());
  event.add(epi.chain);
  for (auto it = epi.chain.rbegin(); it != epi.chain.rend(); ++it) rw.erase(*it);
  eraseFusedOp(rw, fused);
  event.expr += " |> " + epi.expr.str();
  event.reason += "; epilogue of " + std::to_string(epi.chain.size()) + " elementwise ops";
  return withEpi;
}

// reduce: reduction((elementwise op)+)  =>  tsfuse::reduce(operands, expr, kind, dim, keepdim, dtype)
//
//   %d = aten::sub(%x, %y)                 %l = prim::ListConstruct(%x, %y)
//   %s = aten::sum(%d, %dims, ...)   =>    %s = tsfuse::reduce(%l, "v1: sub($0, $1)", "sum", [0], ...)
//
// Reductions are offered first-to-last; an elementwise chain consuming the reduced value alone
// joins as the epilogue.
class FuseBroadcastReducePattern : public Pattern {
 public:
  FuseBroadcastReducePattern() : Pattern("fuse_broadcast_reduce", WalkOrder::Forward, NestedBlocks::First) {}

  bool matchAndRewrite(Node* reduction, Rewriter& rw) override {
    if (isSoftmax(reduction)) return fuseSoftmax(reduction, rw);
    ReductionMatch rm;
    if (!matchReduction(reduction, rm, nullptr)) return false;
    Node* producer = rm.input->node();
    ElementwiseMatch m;
    std::string why;
    if (producer->owningBlock() != reduction->owningBlock() || !matchElementwise(producer, m, &why))
      return false;  // reducing a value no elementwise op made here: not a candidate
    if (std::string scope = gradScopeBoundary(producer, reduction); !scope.empty())
      return rw.notifyMatchFailure({reduction, producer}, "the reduced value %" + rm.input->debugName() + ": " + scope);
    const bool shared = rm.input->uses().size() != 1 && !onlyReductions(rm.input);
    if (shared && !fusibleReaders(rm.input))
      return rw.notifyMatchFailure({reduction, producer}, "the reduced value %" + rm.input->debugName() +
                                                              " is also used elsewhere, so it is materialised anyway");
    std::optional<Region> region = hazardFreeRegion(producer, reduction, rw);
    if (!region) return false;
    Region r = std::move(*region);
    // Its other readers are elementwise ops (and reductions) that fuse too: this reduction gets
    // its own copy of the region where that is cheap, else the value is stored for them all.
    if (shared && !recomputable(r))
      return rw.notifyMatchFailure({reduction, producer}, "the reduced value %" + rm.input->debugName() +
                                                              " is also read by other elementwise ops, and its " +
                                                              std::to_string(r.nodes.size()) +
                                                              " ops are too many or too costly to compute twice");
    Epilogue epi;
    std::string epiHazard;
    if (!rm.spec.withIndices()) {
      epi = planEpilogue(reduction->output(), /*standIn=*/true);
      if (!epi.chain.empty()) epiHazard = epilogueHazard(epi, r, rw.aliasDb());
    }
    // A region recomputed per reduction shares its repeats with the others: they stay stored.
    const bool withEpilogue = !epi.chain.empty() && epiHazard.empty();
    Node* at = withEpilogue ? epi.chain.back() : reduction;
    const bool onlyReader = valueReaders(rm.input) == 1;
    std::string repeats = onlyReader ? planBroadcastRepeats(r, at, rw.aliasDb()) : "";

    // The graph changes from here on.
    std::string metadata;
    if (size_t n = readMetadataFromStandIn(rw.graph(), r, rm.input))
      metadata = "; " + std::to_string(n) + " reader(s) of %" + rm.input->debugName() +
                 "'s metadata alone read tsfuse::shape_of";
    std::string dup;
    if (rm.input->uses().size() != 1) {  // several reductions: this one gets its own copy
      dup = "; the elementwise region is recomputed for each of the " + std::to_string(rm.input->uses().size()) +
            (shared ? " readers of %" : " reductions of %") + rm.input->debugName();
      r = growRegion(duplicateFor(rw.graph(), reduction, rm.input, r));
    }
    RewriteEvent e;
    e.add(r.nodes).add(reduction).add(r.repeats);
    e.expr = r.expr.str() + " |> " + describe(rm.spec);
    e.fusedOp = "tsfuse::reduce";
    e.reason = "fused " + std::to_string(r.nodes.size()) + " elementwise ops and " + reduction->kind().toQualString();
    for (const auto& b : r.boundary) e.reason += "; " + b;
    e.reason += metadata + dup + repeats;

    Node* fused = nullptr;
    if (rm.spec.withIndices()) {
      e.fusedOp = "tsfuse::reduce_with_indices";
      fused = rewriteWithIndices(rw, r, reduction, rm.spec);
    } else {
      c10::IValue dims;  // None: all dims
      if (rm.spec.dims) dims = c10::IValue(c10::List<int64_t>(*rm.spec.dims));
      c10::IValue dtype;
      if (rm.spec.dtype) dtype = c10::IValue(static_cast<int64_t>(*rm.spec.dtype));
      fused = rewriteRegion(rw, r, reduction, "tsfuse::reduce", {reductionText(rm.spec), dims, rm.spec.keepdim, dtype});
      if (!epiHazard.empty())
        e.reason += "; epilogue not fused: " + epiHazard;
      else if (withEpilogue)
        fused = absorbEpilogue(rw, fused, epi, e);
      if (epiHazard.empty() && !epi.stop.empty()) e.reason += "; the epilogue stops at " + epi.stop;
      // The plain rewrite erased pure nodes, the fused output took the reduction's place, and its
      // lists (operands, dims, donated) are new and read by it alone: the alias database still
      // answers (one build per pass instead of one per reduction). The other forms add nodes
      // behind the database's back (shape_of readers, duplicated regions, repeats, the epilogue's
      // second fused op): rebuilt.
      if (metadata.empty() && dup.empty() && r.repeats.empty() && !withEpilogue) {
        std::vector<Value*> fresh;
        for (Value* v : fused->inputs())
          if (v->type()->cast<c10::ListType>()) fresh.push_back(v);
        rw.keepAliasDb(std::move(fresh));
      }
    }
    rw.notifyRewrite(std::move(e), fused);
    return true;
  }
};

}  // namespace

bool FuseBroadcastReduce(std::shared_ptr<Graph>& graph) {
  FuseBroadcastReducePattern pattern;
  return runPattern(graph, pattern);
}

}  // namespace tsfuse
