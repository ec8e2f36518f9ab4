#include "passes/softmax_region.h"

#include "passes/region.h"

#include <torch/csrc/jit/ir/constants.h>

namespace tsfuse {

bool isSoftmax(Node* n) {
  if (n->kind() != c10::aten::softmax && n->kind() != c10::aten::log_softmax) return false;
  const c10::FunctionSchema* s = n->maybeSchema();
  return s && s->overload_name() == "int";  // (self, int dim, ScalarType? dtype)
}

bool fuseSoftmax(Node* n, Rewriter& rw) {
  Value* v = n->input(0);
  Node* producer = v->node();
  ElementwiseMatch m;
  if (producer->owningBlock() != n->owningBlock() || !matchElementwise(producer, m, nullptr) ||
      producer->kind() == c10::aten::to)
    return false;  // the softmax of a value no elementwise op made here: not a candidate
  const std::string what = std::string(n->kind().toUnqualString()) + " of %" + v->debugName();
  auto dim = torch::jit::toIValue(n->input(1));
  if (!dim || !dim->isInt()) return rw.notifyMatchFailure({n, producer}, what + ": dim is not a constant");
  auto dtype = torch::jit::toIValue(n->input(2));
  if (!dtype || !dtype->isNone())
    return rw.notifyMatchFailure({n, producer}, what + ": a dtype argument (the value would be converted first)");
  if (v->uses().size() != 1)
    return rw.notifyMatchFailure({n, producer}, what + ": the value is also used elsewhere, so it is materialised anyway");
  std::optional<Region> region = hazardFreeRegion(producer, n, rw);
  if (!region) return false;
  Region& r = *region;
  const bool log = n->kind() == c10::aten::log_softmax;
  RewriteEvent e;
  e.add(r.nodes).add(n);
  e.expr = r.expr.str() + " |> " + (log ? "log_softmax" : "softmax") + "(dim=" + std::to_string(dim->toInt()) + ")";
  e.fusedOp = "tsfuse::softmax";
  e.reason = "fused " + std::to_string(r.nodes.size()) + " elementwise ops and " + n->kind().toQualString() +
             " (the value is recomputed for its maximum, its sum and the result, never stored)";
  for (const auto& b : r.boundary) e.reason += "; " + b;
  Node* fused = rewriteRegion(rw, r, n, "tsfuse::softmax", {dim->toInt(), log});
  rw.notifyRewrite(std::move(e), fused);
  return true;
}

}  // namespace tsfuse
