#include "passes/sink_reshapes.h"

#include "passes/analysis/grad_scope.h"
#include "passes/analysis/op_table.h"
#include "passes/analysis/symbolic_shapes.h"
#include "passes/framework/driver.h"

#include "kernels/runtime/check_reshape.h"

#include <torch/csrc/jit/ir/constants.h>

#include <string>
#include <unordered_set>

namespace tsfuse {
namespace {

using torch::jit::toIValue;

bool isReshape(Node* n) { return n->kind() == c10::aten::reshape && n->inputs().size() == 2; }

// One element of an int[] argument: a constant, or an int value of the graph.
struct IntArg {
  Value* v = nullptr;  // nullptr: the constant c
  int64_t c = 0;
  std::optional<int64_t> constant() const { return v ? constantInt(v) : c; }
};

// The elements of an int[] argument: a constant list's or a prim::ListConstruct's.
std::optional<std::vector<IntArg>> listElements(Value* list) {
  std::vector<IntArg> out;
  if (auto c = toIValue(list)) {
    if (!c->isIntList()) return std::nullopt;
    for (int64_t x : c->toIntVector()) out.push_back(IntArg{nullptr, x});
    return out;
  }
  if (list->node()->kind() != c10::prim::ListConstruct) return std::nullopt;
  for (Value* e : list->node()->inputs()) out.push_back(IntArg{e});
  return out;
}

// The two ints an int value is the product (or sum, by `kind`) of: n * k, or as a trace records
// it, int(tensor(n) * tensor(k)).
std::optional<std::pair<Value*, Value*>> operandsOf(Value* v, c10::Symbol kind) {
  Node* p = v->node();
  if (p->kind() == c10::aten::Int) {
    p = p->input()->node();
    if (p->kind() != kind || p->inputs().size() < 2) return std::nullopt;
    Node *a = p->input(0)->node(), *b = p->input(1)->node();
    if (a->kind() != c10::prim::NumToTensor || b->kind() != c10::prim::NumToTensor) return std::nullopt;
    return std::make_pair(a->input(), b->input());
  }
  if (p->kind() != kind || p->inputs().size() != 2) return std::nullopt;
  return std::make_pair(p->input(0), p->input(1));
}

// Two ints that are provably equal: equal constants, one value, one proven size, or the same
// product or sum of such ints (n * k written twice).
bool sameInt(const IntArg& x, const IntArg& y, int depth = 0) {
  auto cx = x.constant(), cy = y.constant();
  if (cx || cy) return cx && cy && *cx == *cy;
  if (x.v == y.v) return true;
  auto sx = symbolicSize(x.v), sy = symbolicSize(y.v);
  if (sx && sy && sx->kind != SymSize::Kind::Value && *sx == *sy) return true;
  if (depth > 8) return false;
  for (c10::Symbol kind : {c10::aten::mul, c10::aten::add}) {
    auto a = operandsOf(x.v, kind), b = operandsOf(y.v, kind);
    if (!a || !b) continue;
    auto same = [&](Value* i, Value* j) { return sameInt({i}, {j}, depth + 1); };
    return (same(a->first, b->first) && same(a->second, b->second)) ||
           (same(a->first, b->second) && same(a->second, b->first));
  }
  return false;
}

// Two int[] arguments that are provably the same list, element by element.
bool sameList(Value* a, Value* b) {
  if (a == b) return true;
  auto ea = listElements(a), eb = listElements(b);
  if (!ea || !eb || ea->size() != eb->size()) return false;
  for (size_t i = 0; i < ea->size(); ++i)
    if (!sameInt((*ea)[i], (*eb)[i])) return false;
  return true;
}

bool isSize(const IntArg& x, const SymSize& s) {
  if (auto c = x.constant()) return s.kind == SymSize::Kind::Constant && s.c == *c;
  auto mine = symbolicSize(x.v);
  return mine && *mine == s;
}

// Whether int `p` is -1 (the size reshape infers) or provably the product of sizes[0, m).
bool flattens(const IntArg& p, const std::vector<SymSize>& sizes, size_t m, bool inferred = true) {
  auto c = p.constant();
  if (inferred && c == std::optional<int64_t>(-1)) return true;
  if (m == 1) return isSize(p, sizes[0]);
  if (c) {  // a constant product of constant sizes
    int64_t product = 1;
    for (size_t i = 0; i < m; ++i) {
      if (sizes[i].kind != SymSize::Kind::Constant) return false;
      product *= sizes[i].c;
    }
    return m > 0 && product == *c;
  }
  auto mul = operandsOf(p.v, c10::aten::mul);
  if (m == 0 || !mul) return false;
  if (isSize({mul->second}, sizes[m - 1]) && flattens({mul->first}, sizes, m - 1, false)) return true;
  return m == 2 && isSize({mul->first}, sizes[1]) && isSize({mul->second}, sizes[0]);
}

struct SinkReshapesPattern : Pattern {
  // Values this walk computed past a reshape: their reshape's error is already kept (rule 1).
  std::unordered_set<Value*> sunk;

  SinkReshapesPattern() : Pattern("sink_reshapes", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    return sinkThroughElementwise(n, rw) || sinkThroughReduction(n, rw) || dropRestoringView(n, rw);
  }

  static Node* insertReshape(Rewriter& rw, Value* v, Value* list, Node* like) {
    Node* r = rw.graph().insertNode(rw.graph().create(c10::aten::reshape, {v, list}, 1));
    r->output()->setType(like->output()->type());
    r->setSourceRange(like->sourceRange());
    return r;
  }

  void record(Rewriter& rw, Node* n, Node* now, const std::string& why) {
    RewriteEvent e;
    e.add(n);
    e.fusedOp = now->kind().toQualString();
    e.reason = why;
    rw.notifyRewrite(std::move(e), now);
  }

  // 1. f(reshape(a, s), reshape(b, s), numbers) -> reshape(f(a, b, numbers), s)
  bool sinkThroughElementwise(Node* n, Rewriter& rw) {
    ElementwiseMatch m;
    if (!matchElementwise(n, m, nullptr) || !viewsCommute(m) || n->outputs().size() != 1) return false;
    std::vector<Node*> reshapes;
    for (const MatchedArg& a : m.args) {
      if (!a.tensor) continue;
      if (!isReshape(a.tensor->node())) return false;
      if (!readsInGradScope(a.tensor, n))
        return rw.notifyMatchFailure({n, a.tensor->node()}, "reshape of %" + a.tensor->node()->input(0)->debugName() +
                                                                " not moved past " + describeNode(n) +
                                                                ": the autograd mode changes between them");
      // (one reshape read twice, clamp(r, min=r), is one node: erased once)
      if (std::find(reshapes.begin(), reshapes.end(), a.tensor->node()) == reshapes.end())
        reshapes.push_back(a.tensor->node());
    }
    if (reshapes.empty()) return false;
    Value* list = reshapes[0]->input(1);
    auto shape = symbolicShape(reshapes[0]->input(0));
    for (Node* r : reshapes) {
      if (!sameList(r->input(1), list)) return false;  // reshaped differently: not this form
      auto s = symbolicShape(r->input(0));
      if (!shape || !s || *s != *shape)
        return rw.notifyMatchFailure({n, r}, "reshape of %" + r->input(0)->debugName() + " not moved past " +
                                                 describeNode(n) +
                                                 ": its operands are not provably of one shape before the reshape");
    }
    torch::jit::WithInsertPoint guard(n);
    torch::jit::Graph& g = rw.graph();
    Value* first = reshapes[0]->input(0);
    if (!sunk.count(first)) {  // the reshape's error, kept where the reshape was
      Node* check = g.insertNode(g.create(c10::Symbol::fromQualString(kCheckReshapeOp), {first, list}, 1));
      check->output()->setType(first->type());
      first = check->output();
    }
    std::unordered_map<Value*, Value*> source;
    for (Node* r : reshapes) source[r->output()] = r->input(0);
    source[reshapes[0]->output()] = first;
    Node* f = g.insertNode(g.createClone(n, [&](Value* v) {
      auto it = source.find(v);
      return it == source.end() ? v : it->second;
    }));
    f->output()->setType(c10::TensorType::get());
    Node* back = insertReshape(rw, f->output(), list, n);
    sunk.insert(f->output());
    n->output()->replaceAllUsesWith(back->output());
    record(rw, n, f,
           describeNode(n) +
               " over operands reshaped alike -> the op over the operands, then the reshape "
               "(broadcast dims flattened and restored are never stored)");
    rw.erase(n);
    for (Node* r : reshapes)
      if (!r->output()->hasUses()) rw.erase(r);
    return true;
  }

  // 2. red(reshape(v, [-1, d]), dim=-1) -> reshape(red(v, dim=-1), [-1] or [-1, 1])
  bool sinkThroughReduction(Node* n, Rewriter& rw) {
    ReductionMatch red;
    if (n->outputs().size() != 1 || !matchReduction(n, red, nullptr) || !isReshape(red.input->node())) return false;
    Node* reshape = red.input->node();
    Value* v = reshape->input(0);
    if (!readsInGradScope(red.input, n))
      return rw.notifyMatchFailure({n, reshape}, describeNode(n) + " not moved before the reshape of %" +
                                                     v->debugName() + ": the autograd mode changes between them");
    // the last of the reshaped value's two dims, named -1 or 1
    if (!sunk.count(v) || !red.spec.dims || red.spec.dims->size() != 1 ||
        ((*red.spec.dims)[0] != -1 && (*red.spec.dims)[0] != 1))
      return false;
    auto flat = listElements(reshape->input(1));
    auto shape = symbolicShape(v);
    if (!flat || flat->size() != 2 || !shape || shape->size() < 2 || !isSize((*flat)[1], shape->back()) ||
        !flattens((*flat)[0], *shape, shape->size() - 1))
      return rw.notifyMatchFailure({n, reshape}, describeNode(n) + " not moved before the reshape of %" +
                                                     v->debugName() +
                                                     ": the reshape is not provably [<the product of its other "
                                                     "sizes, or -1>, <its last size>]");
    torch::jit::WithInsertPoint guard(n);
    torch::jit::Graph& g = rw.graph();
    std::optional<size_t> dim = dimArgumentOf(n);
    if (!dim) return false;
    // -1, an int or an int[] as the argument was
    const bool one = n->input(*dim)->type()->kind() == c10::TypeKind::IntType;
    Value* last = one ? g.insertConstant(int64_t{-1}) : g.insertConstant(std::vector<int64_t>{-1});
    Node* r = g.insertNode(g.createClone(n, [&](Value* x) { return x == red.input ? v : x; }));
    r->replaceInput(*dim, last);
    r->output()->setType(c10::TensorType::get());
    // [the same first size] (or [it, 1]): the product of the dims before the last, as before
    const IntArg first = (*flat)[0];
    std::vector<Value*> sizes{first.v ? first.v : g.insertConstant(first.c)};
    if (red.spec.keepdim) sizes.push_back(g.insertConstant(int64_t{1}));
    Value* list = g.insertNode(g.createList(c10::IntType::get(), sizes))->output();
    Node* back = insertReshape(rw, r->output(), list, n);
    sunk.insert(r->output());
    n->output()->replaceAllUsesWith(back->output());
    record(rw, n, r, describeNode(n) + " over the last dim of a flattened value -> over the value, then flattened");
    rw.erase(n);
    if (!reshape->output()->hasUses()) rw.erase(reshape);
    return true;
  }

  // 3. view|reshape(reshape(r, [-1]), sizes) -> r, r's sizes provably `sizes`
  bool dropRestoringView(Node* n, Rewriter& rw) {
    if ((n->kind() != c10::aten::view && n->kind() != c10::aten::reshape) || n->inputs().size() != 2) return false;
    Node* flat = n->input(0)->node();
    if (!isReshape(flat) || !sunk.count(flat->input(0))) return false;
    Value* r = flat->input(0);
    if (!readsInGradScope(r, n))
      return rw.notifyMatchFailure({n, flat}, describeNode(n) + " of the flattened %" + r->debugName() +
                                                  " kept: the autograd mode changes after %" + r->debugName());
    auto shape = symbolicShape(r);
    auto to = listElements(flat->input(1));
    if (!shape || shape->empty() || !to || to->size() != 1 || !flattens((*to)[0], *shape, shape->size())) return false;
    auto sizes = symbolicSizes(n->input(1));
    if (!sizes || *shape != *sizes)
      return rw.notifyMatchFailure({n, flat}, describeNode(n) + " of the flattened %" + r->debugName() +
                                                  " kept: its sizes are not provably those of %" + r->debugName());
    RewriteEvent e;
    e.add(n).add(flat);
    e.fusedOp = r->node()->kind().toQualString();
    e.reason = describeNode(n) + " restores the sizes %" + r->debugName() + " had before it was flattened -> %" +
               r->debugName();
    rw.notifyRewrite(std::move(e), r->node());
    n->output()->replaceAllUsesWith(r);
    rw.erase(n);
    if (!flat->output()->hasUses()) rw.erase(flat);
    return true;
  }
};

}  // namespace

bool SinkReshapes(std::shared_ptr<torch::jit::Graph>& graph) {
  SinkReshapesPattern pattern;
  return runPattern(graph, pattern);
}

}  // namespace tsfuse
