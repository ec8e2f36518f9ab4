// Replacing a region by one fused op, and erasing what nothing reads any more (see rewrite.h).
#include "passes/regions/rewrite.h"

#include "passes/analysis/op_table.h"
#include "passes/regions/fused_values.h"

#include <torch/csrc/jit/ir/named_value.h>

#include <algorithm>

namespace tsfuse {

Value* insertOperandList(Graph& g, const Region& r) {
  std::vector<Value*> operands = r.operands;
  std::vector<Value*> others;  // the tensors whose layout a broadcast_repeat must agree with
  for (Value* v : r.operands)
    if (isTensor(v) && std::find(r.repeats.begin(), r.repeats.end(), v->node()) == r.repeats.end()) others.push_back(v);
  for (Value*& v : operands) {
    Node* p = v->node();
    if (std::find(r.repeats.begin(), r.repeats.end(), p) == r.repeats.end()) continue;
    Value* list = g.insertNode(g.createList(c10::TensorType::get(), others))->output();
    v = g.insert(c10::Symbol::fromQualString("tsfuse::broadcast_repeat"), {p->input(0), p->input(1), list}, {},
                 p->sourceRange());
  }
  return insertTensorList(g, operands);
}

Value* insertTensorList(Graph& g, const std::vector<Value*>& values) {
  std::vector<Value*> tensors = values;
  for (Value*& v : tensors) {
    if (isTensor(v)) continue;
    Value* number = v;
    v = g.insert(c10::Symbol::fromQualString("tsfuse::wrapped_number"), {number});
    v->setType(c10::TensorType::fromNumberType(*number->type()));
  }
  return g.insertNode(g.createList(c10::TensorType::get(), tensors))->output();
}

void eraseRegionNodes(Rewriter& rw, const Region& r) {
  for (auto it = r.nodes.rbegin(); it != r.nodes.rend(); ++it)
    if (!(*it)->hasUses()) rw.erase(*it);  // what it recomputes for other readers stays
  for (Node* p : r.repeats)
    if (!p->hasUses()) rw.erase(p);
}

std::unordered_map<Value*, Value*> cloneNodes(Graph& g, const std::vector<Node*>& nodes,
                                              std::unordered_map<Value*, Value*> map) {
  for (Node* n : nodes) {
    Node* c = g.insertNode(g.createClone(n, [&](Value* in) {
      auto it = map.find(in);
      return it == map.end() ? in : it->second;
    }));
    c->setSourceRange(n->sourceRange());
    map[n->output()] = c->output();
  }
  return map;
}

void eraseFusedOp(Rewriter& rw, Node* fused) {
  Node* list = fused->input(0)->node();
  rw.erase(fused);
  if (list->kind() == c10::prim::ListConstruct && !list->hasUses()) rw.erase(list);
}

Node* rewriteRegion(Rewriter& rw, Region& r, Node* consumer, const char* op,
                    const std::vector<torch::jit::NamedValue>& extra) {
  Graph& g = rw.graph();
  torch::jit::WithInsertPoint guard(consumer);
  Value* list = insertOperandList(g, r);
  std::vector<torch::jit::NamedValue> args = {list, r.expr.str()};
  args.insert(args.end(), extra.begin(), extra.end());
  Value* out = g.insert(c10::Symbol::fromQualString(op), args, {}, consumer->sourceRange());
  Node* fused = out->node();
  fused->setSourceRange(consumer->sourceRange());
  rw.replaceAllUsesWith(consumer->output(), out);
  if (consumer != r.root()) rw.erase(consumer);
  eraseRegionNodes(rw, r);
  return fused;
}

size_t readMetadataFromStandIn(Graph& g, const Region& r, Value* v) {
  std::vector<torch::jit::Use> readers;
  for (const auto& use : v->uses())
    if (isMetadataRead(use.user)) readers.push_back(use);
  if (readers.empty()) return 0;
  torch::jit::WithInsertPoint guard(v->node()->next());
  Value* list = insertOperandList(g, r);
  Node* s = g.insertNode(g.create(kShapeOfOp, {list, g.insertConstant(r.expr.str())}, 1));
  s->output()->setType(v->type());
  s->setSourceRange(v->node()->sourceRange());
  for (const auto& use : readers) use.user->replaceInput(use.offset, s->output());
  return readers.size();
}

size_t readReducedMetadataFromStandIn(Graph& g, Node* reduce, const std::vector<Node*>& readers) {
  if (readers.empty()) return 0;
  torch::jit::WithInsertPoint guard(reduce);
  Node* s = g.insertNode(g.create(kShapeOfOp, 1));
  for (size_t i = 0; i <= 6; ++i) s->addInput(reduce->input(i));  // operands .. epilogue (not donated)
  s->output()->setType(reduce->output()->type());
  s->setSourceRange(reduce->sourceRange());
  for (Node* reader : readers) reader->replaceInputWith(reduce->output(), s->output());
  return readers.size();
}

}  // namespace tsfuse
