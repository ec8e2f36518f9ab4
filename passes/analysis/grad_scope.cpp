#include "passes/analysis/grad_scope.h"

#include "passes/framework/driver.h"

#include <algorithm>

namespace tsfuse {

using torch::jit::Node;
using torch::jit::Value;

bool changesGradModeStrictly(const Node* n) {
  static const c10::Symbol setGradEnabled = c10::Symbol::fromQualString("aten::set_grad_enabled");
  const c10::Symbol k = n->kind();
  return k == c10::prim::Enter || k == c10::prim::Exit || k == setGradEnabled;
}

Node* noGradBlockExit(const Node* enter) {
  if (enter->kind() != c10::prim::Enter) return nullptr;
  const Value* ctx = enter->input(0);
  const auto cls = ctx->type()->cast<c10::ClassType>();
  if (!cls || !cls->name() || cls->name()->qualifiedName() != "__torch__.torch.autograd.grad_mode.no_grad")
    return nullptr;
  for (Node* n = enter->next(); n != enter->owningBlock()->return_node(); n = n->next())
    if (n->kind() == c10::prim::Exit && n->input(0) == ctx) return n;
  return nullptr;
}

bool readAfter(const Value* v, const Node* n) {
  for (const auto& use : v->uses()) {
    const Node* at = ancestorIn(use.user, n->owningBlock());
    if (!at || n->isBefore(at)) return true;  // (a reader outside n's block may run after n)
  }
  return false;
}

bool sealedNoGradBlock(const Node* enter) {
  const Node* exit = noGradBlockExit(enter);
  if (!exit) return false;
  for (const Node* m = enter->next(); m != exit; m = m->next())
    for (const Value* v : m->outputs()) {
      if (!v->type()->cast<c10::TensorType>()) continue;
      for (const auto& use : v->uses())
        if (use.user->kind() != c10::aten::detach && exit->isBefore(ancestorIn(use.user, exit->owningBlock())))
          return false;
    }
  return true;
}

bool changesGradMode(const Node* n) {
  if (!changesGradModeStrictly(n)) return false;
  if (n->kind() == c10::prim::Enter) return !sealedNoGradBlock(n);
  if (n->kind() == c10::prim::Exit) {
    const Value* ctx = n->input(0);
    return !(ctx->node()->owningBlock() == n->owningBlock() &&
             std::any_of(ctx->uses().begin(), ctx->uses().end(), [&](const auto& u) {
               return u.user->kind() == c10::prim::Enter && noGradBlockExit(u.user) == n && sealedNoGradBlock(u.user);
             }));
  }
  return true;
}

namespace {

// The node between a and b (one block) that changes the autograd mode, or nullptr.
const Node* modeChangeBetween(const Node* a, const Node* b, bool strict) {
  if (b->isBefore(a)) std::swap(a, b);
  for (const Node* n = b->prev(); n != a && n->kind() != c10::prim::Param; n = n->prev())
    if (strict ? changesGradModeStrictly(n) : changesGradMode(n)) return n;
  return nullptr;
}

}  // namespace

bool sameGradScope(const Node* a, const Node* b) {
  return a->owningBlock() == b->owningBlock() && (a == b || !modeChangeBetween(a, b, false));
}

bool readsInGradScope(const Value* v, const Node* n) {
  for (const Node* at = n; at; at = at->owningBlock()->owningNode()) {
    for (const Node* p = at->prev(); p != v->node(); p = p->prev()) {
      if (p->kind() == c10::prim::Param) break;  // the start of at's block: on to the node holding it
      if (changesGradMode(p)) return false;
    }
    if (at->owningBlock() == v->node()->owningBlock()) return true;
  }
  return true;
}

std::string gradScopeBoundary(const Node* a, const Node* b, bool strict) {
  if (a->owningBlock() != b->owningBlock()) return "they are in different blocks";
  if (a == b) return "";
  const Node* n = modeChangeBetween(a, b, strict);
  if (!n) return "";
  return std::string(n->kind().toQualString()) +
         " between them changes the autograd mode (a `with` block or "
         "set_grad_enabled): one fused op runs in one mode";
}

}  // namespace tsfuse
