// prototype_casts (passes/prototype_casts.h):
//
//   %r = aten::to(%x, %y, %nb, %copy, %fmt)           %d = prim::dtype(%y)
//                                                     %l = prim::layout(%y)
//                                           =>        %dev = prim::device(%y)
//                                                     %p = aten::empty([], %d, %l, %dev, None, None)
//                                                     %r = aten::to(%x, %p, %nb, %copy, %fmt)
//
// The prototype is 0-dim, so as a fused op's operand it broadcasts with nothing; a traced model
// records the same casts with constants (aten::to.device), which fuse without one.
#include "passes/prototype_casts.h"

#include "passes/analysis/op_table.h"
#include "passes/framework/driver.h"

namespace tsfuse {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// aten::to.dtype_layout(x, None, None, None, None, non_blocking, False, None): x itself.
bool identityTo(Node* n) {
  if (!n->matches("aten::to.dtype_layout(Tensor(a) self, *, ScalarType? dtype=None, Layout? layout=None, Device? "
                  "device=None, bool? pin_memory=None, bool non_blocking=False, bool copy=False, MemoryFormat? "
                  "memory_format=None) -> Tensor(a)"))
    return false;
  for (size_t i : {1, 2, 3, 4, 7}) {
    auto c = torch::jit::toIValue(n->input(i));
    if (!c || !c->isNone()) return false;
  }
  auto copy = torch::jit::toIValue(n->input(6));
  return copy && copy->isBool() && !copy->toBool();
}

// x.type_as(y) -> x.to(y, false, false, None): the same cast (type_as is x.to(y.options())), in
// the spelling whose schema says it may return x. Where y has x's dtype both return x itself, but
// type_as's schema names no alias, so the alias analysis took its result for a new tensor: an
// in-place write to x (or a view of it) between the cast and a fused reader of the result went
// unseen (`v = x[1:].type_as(y); x.clamp_(min=0); v.neg_()` fused the neg past the clamp).
bool spellAsTo(Node* n, Rewriter& rw) {
  torch::jit::Graph& g = rw.graph();
  torch::jit::WithInsertPoint at(n);
  Value* falseV = g.insertConstant(false);
  Value* none = g.insertConstant(c10::IValue());
  Node* cast = g.insertNode(g.create(c10::aten::to, {n->input(0), n->input(1), falseV, falseV, none}));
  cast->output()->setType(n->output()->type());
  cast->setSourceRange(n->sourceRange());
  TORCH_INTERNAL_ASSERT(cast->maybeSchema(), "prototype_casts: no aten::to.other for type_as");
  RewriteEvent e;
  e.add(n);
  e.reason = "x.type_as(y) -> x.to(y): the same cast, whose schema says it may return x (an alias)";
  rw.notifyRewrite(std::move(e), cast);
  rw.replaceAllUsesWith(n->output(), cast->output());
  rw.erase(n);
  return true;
}

class PrototypeCastsPattern : public Pattern {
 public:
  PrototypeCastsPattern() : Pattern("prototype_casts", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    if (identityTo(n)) {  // scripted y.type() makes one: x.type(y.type()) is x.to(y.to())
      RewriteEvent e;
      e.add(n);
      e.reason = "to() with no dtype, layout, device or memory format and copy=False -> its input (to() returns it)";
      rw.notifyRewrite(std::move(e), n->input(0)->node());
      rw.replaceAllUsesWith(n->output(), n->input(0));
      rw.erase(n);
      return true;
    }
    const bool other = n->matches(
        "aten::to.other(Tensor(a) self, Tensor other, bool non_blocking=False, bool "
        "copy=False, MemoryFormat? memory_format=None) -> Tensor(a)");
    const bool typeAs = n->matches("aten::type_as(Tensor self, Tensor other) -> Tensor");
    const bool dtype = n->matches(
                           "aten::to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool "
                           "copy=False, MemoryFormat? memory_format=None) -> Tensor(a)") &&
                       !torch::jit::toIValue(n->input(1));
    if (!other && !typeAs && !dtype) return false;
    Value* x = n->input(0);
    ElementwiseMatch m;
    torch::jit::Graph& g = rw.graph();
    if (x->node()->owningBlock() != n->owningBlock() || !matchElementwise(x->node(), m, nullptr)) {
      if (typeAs) return spellAsTo(n, rw);
      return false;  // a cast of no fusible value: nothing to gain
    }
    torch::jit::WithInsertPoint at(n);
    Value* typeOf = dtype ? x : n->input(1);
    auto meta = [&](c10::Symbol kind, Value* of, const c10::TypePtr& type) {
      Node* q = g.insertNode(g.create(kind, {of}));
      q->output()->setType(type);
      q->setSourceRange(n->sourceRange());
      return q->output();
    };
    Value* d = dtype ? n->input(1) : meta(c10::prim::dtype, typeOf, c10::IntType::get());
    Value* layout = meta(c10::prim::layout, typeOf, c10::IntType::get());
    Value* device = meta(c10::prim::device, typeOf, c10::DeviceObjType::get());
    Value* none = g.insertConstant(c10::IValue());
    Value* p = g.insert(c10::aten::empty, {c10::IntArrayRef{}},
                        {torch::jit::NamedValue("dtype", d), torch::jit::NamedValue("layout", layout),
                         torch::jit::NamedValue("device", device), torch::jit::NamedValue("pin_memory", none),
                         torch::jit::NamedValue("memory_format", none)});
    p->node()->setSourceRange(n->sourceRange());
    Value* falseV = g.insertConstant(false);
    std::vector<Value*> args = {x, p};
    if (typeAs) {
      args.insert(args.end(), {falseV, falseV, none});
    } else {
      for (size_t i = 2; i < n->inputs().size(); ++i) args.push_back(n->input(i));
    }
    Node* cast = g.insertNode(g.create(c10::aten::to, args));
    cast->output()->setType(n->output()->type());
    cast->setSourceRange(n->sourceRange());
    TORCH_INTERNAL_ASSERT(cast->maybeSchema(), "prototype_casts: no aten::to.other for the cast");
    RewriteEvent e;
    e.add(n);
    e.reason = std::string(typeAs  ? "x.type_as(y)"
                           : other ? "x.to(y)"
                                   : "x.to(dtype known at run time)") +
               " -> x.to(p), p a 0-dim prototype of that type (the cast fuses; its source's metadata alone is read)";
    rw.notifyRewrite(std::move(e), cast);
    rw.replaceAllUsesWith(n->output(), cast->output());
    rw.erase(n);
    return true;
  }
};

}  // namespace

bool PrototypeCasts(std::shared_ptr<torch::jit::Graph>& graph) {
  PrototypeCastsPattern pattern;
  return runPattern(graph, pattern);
}

}  // namespace tsfuse
