// fold_upcast (passes/fold_upcast.h): a dtype-dispatching prim::If that computes torchvision's
// _upcast -> tsfuse::upcast. The If is evaluated for every dtype, so any spelling of the same
// decision (nested Ifs, `in` lists, ==) folds, and anything that decides differently is kept.
#include "passes/fold_upcast.h"

#include "kernels/reference/aten_eval.h"
#include "passes/framework/driver.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <optional>

namespace tsfuse {
namespace {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Value;

// The dtypes the If is evaluated for: every dtype a tensor reaching it may have.
constexpr c10::ScalarType kDtypes[] = {c10::kBool,
                                       c10::kByte,
                                       c10::kChar,
                                       c10::kShort,
                                       c10::kInt,
                                       c10::kLong,
                                       c10::kHalf,
                                       c10::kBFloat16,
                                       c10::kFloat,
                                       c10::kDouble,
                                       c10::kUInt16,
                                       c10::kUInt32,
                                       c10::kUInt64,
                                       c10::kComplexHalf,
                                       c10::kComplexFloat,
                                       c10::kComplexDouble,
                                       c10::ScalarType::Float8_e5m2,
                                       c10::ScalarType::Float8_e4m3fn};

// The If evaluated for a tensor `subject` of dtype d. Every method returns nullopt, with the
// reason in `why`, on anything it cannot evaluate.
struct DtypeEval {
  Value* subject = nullptr;
  c10::ScalarType d = c10::kFloat;
  std::string why;

  template <typename T>
  std::optional<T> fail(std::string reason) {
    if (why.empty()) why = std::move(reason);
    return std::nullopt;
  }

  bool isSubject(Value* v) {
    if (!subject) subject = v;
    return subject == v;
  }

  // An int or bool value (as int64) of the condition.
  std::optional<int64_t> scalar(Value* v) {
    if (auto c = torch::jit::toIValue(v)) {
      if (c->isInt()) return c->toInt();
      if (c->isBool()) return c->toBool() ? 1 : 0;
      return fail<int64_t>("a condition reads a constant that is not an int or a bool");
    }
    Node* n = v->node();
    const auto k = n->kind();
    if (k == c10::prim::dtype || k == c10::aten::is_floating_point) {
      if (!isSubject(n->input(0))) return fail<int64_t>("the conditions read the dtypes of two tensors");
      return k == c10::prim::dtype ? static_cast<int64_t>(d) : int64_t(c10::isFloatingType(d));
    }
    if (k == c10::aten::__not__) {
      auto a = scalar(n->input(0));
      return a ? std::optional<int64_t>(!*a) : std::nullopt;
    }
    if ((k == c10::aten::eq || k == c10::aten::ne) && n->inputs().size() == 2) {
      auto a = scalar(n->input(0)), b = scalar(n->input(1));
      if (!a || !b) return std::nullopt;
      return int64_t((*a == *b) == (k == c10::aten::eq));
    }
    if (k == c10::aten::__contains__ && n->inputs().size() == 2) {  // x in [a, b, ...]
      auto x = scalar(n->input(1));
      if (!x) return std::nullopt;
      std::vector<int64_t> items;
      if (auto c = torch::jit::toIValue(n->input(0)); c && c->isIntList()) {
        items = c->toIntVector();  // folded by constant propagation
      } else if (n->input(0)->node()->kind() == c10::prim::ListConstruct) {
        for (Value* e : n->input(0)->node()->inputs()) {
          auto y = scalar(e);
          if (!y) return std::nullopt;
          items.push_back(*y);
        }
      } else {
        return fail<int64_t>("a condition tests membership in a list that is not built here");
      }
      return int64_t(std::find(items.begin(), items.end(), *x) != items.end());
    }
    return fail<int64_t>(std::string("a condition reads ") + k.toQualString());
  }

  // The dtype of tensor value v: the subject, a cast of it, or a nested If choosing between those.
  std::optional<c10::ScalarType> tensor(Value* v) {
    if (subject == v) return d;
    Node* n = v->node();
    if (n->kind() == c10::prim::If) return branch(n);
    const c10::FunctionSchema* s = n->kind() == c10::aten::to ? n->maybeSchema() : nullptr;
    if (s && s->overload_name() == "dtype" && n->input(0) == subject) {
      auto dtype = torch::jit::toIValue(n->input(1));
      auto nonBlocking = torch::jit::toIValue(n->input(2)), copy = torch::jit::toIValue(n->input(3));
      auto format = torch::jit::toIValue(n->input(4));
      if (dtype && dtype->isInt() && nonBlocking && copy && !nonBlocking->toBool() && !copy->toBool() && format &&
          format->isNone())
        return static_cast<c10::ScalarType>(dtype->toInt());
    }
    return fail<c10::ScalarType>("a branch returns " + describeNode(n) + ", not the tensor or a cast of it");
  }

  std::optional<c10::ScalarType> branch(Node* ifNode) {
    if (ifNode->outputs().size() != 1) return fail<c10::ScalarType>("an If with several outputs");
    auto cond = scalar(ifNode->input(0));
    if (!cond) return std::nullopt;
    return tensor(ifNode->blocks()[*cond ? 0 : 1]->outputs()[0]);
  }
};

// Whether a block holds only nodes the evaluation understands (nothing with an effect to keep).
bool onlyDtypeLogic(const Block* b, std::string* why) {
  for (const Node* n : b->nodes()) {
    const auto k = n->kind();
    const bool known = k == c10::prim::Constant || k == c10::prim::dtype || k == c10::aten::is_floating_point ||
                       k == c10::prim::ListConstruct || k == c10::aten::__contains__ || k == c10::aten::eq ||
                       k == c10::aten::ne || k == c10::aten::__not__ || k == c10::prim::If || k == c10::aten::to;
    if (!known) {
      *why = "a branch runs " + describeNode(n);
      return false;
    }
    for (const Block* inner : n->blocks())
      if (!onlyDtypeLogic(inner, why)) return false;
  }
  return true;
}

// Whether the If's condition looks at a dtype at all (a candidate worth a rejection event).
bool readsDtype(Value* cond) {
  const auto k = cond->node()->kind();
  if (k == c10::prim::dtype || k == c10::aten::is_floating_point) return true;
  for (Value* in : cond->node()->inputs())
    if (in->node()->kind() == c10::prim::dtype || in->node()->kind() == c10::aten::is_floating_point) return true;
  return false;
}

class FoldUpcastPattern : public Pattern {
 public:
  FoldUpcastPattern() : Pattern("fold_upcast", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    if (n->kind() != c10::prim::If || n->outputs().size() != 1 ||
        !n->output()->type()->isSubtypeOf(*c10::TensorType::get()) || !readsDtype(n->input(0)))
      return false;
    // An If inside a branch of a dtype If is part of that one's decision, evaluated with it.
    const Node* owner = n->owningBlock()->owningNode();
    if (owner && owner->kind() == c10::prim::If && readsDtype(owner->input(0))) return false;
    auto reject = [&](const std::string& reason) { return rw.notifyMatchFailure({n}, "dtype If kept: " + reason); };
    std::string why;
    for (const Block* b : n->blocks())
      if (!onlyDtypeLogic(b, &why)) return reject(why);
    Value* subject = nullptr;
    for (c10::ScalarType d : kDtypes) {
      DtypeEval ev{subject, d, {}};
      auto got = ev.branch(n);
      if (!got) return reject(ev.why);
      subject = ev.subject;
      if (*got != upcastDtype(d))
        return reject(std::string("for ") + c10::toString(d) + " it gives " + c10::toString(*got) + ", _upcast gives " +
                      c10::toString(upcastDtype(d)));
    }
    for (Node* at = subject->node(); at; at = at->owningBlock()->owningNode())
      if (at == n) return reject("the tensor is made inside the If");
    Graph& g = rw.graph();
    torch::jit::WithInsertPoint guard(n);
    Node* up = g.insertNode(g.create(c10::Symbol::fromQualString("tsfuse::upcast"), {subject}, 1));
    up->output()->setType(n->output()->type());
    up->setSourceRange(n->sourceRange());
    rw.replaceAllUsesWith(n->output(), up->output());
    RewriteEvent e;
    e.add(n);
    e.reason =
        "prim::If on the dtype of %" + subject->debugName() + " computing torchvision's _upcast -> tsfuse::upcast";
    e.fusedOp = "tsfuse::upcast";
    rw.notifyRewrite(std::move(e), up);
    rw.erase(n);
    return true;
  }
};

}  // namespace

bool FoldUpcast(std::shared_ptr<Graph>& graph) {
  FoldUpcastPattern pattern;
  const bool changed = runPattern(graph, pattern);
  // The folded Ifs' dtype tests read the tensor: gone, so the tensor's one reader is the op.
  if (changed) eraseDeadCode(graph);
  return changed;
}

}  // namespace tsfuse
