#include "passes/framework/driver.h"

namespace tsfuse {

RewriteEvent& RewriteEvent::add(const Node* n) {
  nodes_.push_back(describeNode(n));
  nodeIds_.push_back(nodeId(n));
  return *this;
}

RewriteEvent& RewriteEvent::add(const std::vector<Node*>& nodes) {
  for (const Node* n : nodes) add(n);
  return *this;
}

torch::jit::AliasDb& Rewriter::aliasDb() {
  if (!aliasDb_) aliasDb_ = std::make_unique<torch::jit::AliasDb>(graph_);
  return *aliasDb_;
}

bool Rewriter::notifyMatchFailure(const std::vector<Node*>& nodes, std::string reason) {
  RewriteEvent nodeList;
  nodeList.add(nodes);
  FusionEvent e;
  e.kind = FusionEvent::Kind::Reject;
  e.pass = pattern_.pass();
  e.reason = std::move(reason);
  e.nodes = std::move(nodeList.nodes_);
  e.nodeIds = std::move(nodeList.nodeIds_);
  emitEvent(std::move(e));
  return false;
}

void Rewriter::notifyRewrite(RewriteEvent r, const Node* fused) {
  FusionEvent e;
  e.kind = FusionEvent::Kind::Rewrite;
  e.pass = pattern_.pass();
  e.reason = std::move(r.reason);
  e.expr = std::move(r.expr);
  e.fusedOp = std::move(r.fusedOp);
  e.nodes = std::move(r.nodes_);
  e.nodeIds = std::move(r.nodeIds_);
  e.fusedNode = nodeId(fused);
  emitEvent(std::move(e));
}

void Rewriter::replaceAllUsesWith(torch::jit::Value* from, torch::jit::Value* to) {
  from->replaceAllUsesWith(to);
  if (aliasDb_) aliasDb_->replaceWithNewValue(from, to);
}

void Rewriter::copyAliasing(torch::jit::Value* base, torch::jit::Value* view) {
  if (aliasDb_) aliasDb_->copyValue(base, view);
}

void Rewriter::erase(Node* n) {
  for (Node*& c : cursors_)
    if (c == n) c = pattern_.order() == WalkOrder::Forward ? n->next() : n->prev();
  n->destroy();
}

void Rewriter::walk(torch::jit::Block* block) {
  if (pattern_.nested() == NestedBlocks::First)
    for (Node* n : block->nodes())
      for (torch::jit::Block* sub : n->blocks()) walk(sub);
  const bool forward = pattern_.order() == WalkOrder::Forward;
  // A block's nodes lie between its param node and its return node, which end the walk.
  Node* end = forward ? block->return_node() : block->param_node();
  cursors_.push_back(forward ? block->param_node()->next() : block->return_node()->prev());
  while (cursors_.back() != end) {
    Node* n = cursors_.back();
    if (pattern_.nested() == NestedBlocks::AtOwner)
      for (torch::jit::Block* sub : n->blocks()) walk(sub);
    cursors_.back() = forward ? n->next() : n->prev();
    if (pattern_.matchAndRewrite(n, *this)) {
      // the one invalidation: any rewrite may change what aliases what (keepAliasDb: it did not)
      if (!keepAliasDb_)
        aliasDb_.reset();
      else if (aliasDb_)
        for (torch::jit::Value* v : fresh_) aliasDb_->createValue(v);
      changed_ = true;
    }
    keepAliasDb_ = false;
    fresh_.clear();
  }
  cursors_.pop_back();
}

Node* ancestorIn(Node* n, const torch::jit::Block* block) {
  while (n && n->owningBlock() != block) n = n->owningBlock()->owningNode();
  return n;
}

size_t countNodes(const torch::jit::Block* block) {
  size_t n = 0;
  for (const torch::jit::Node* node : block->nodes()) {
    ++n;
    for (const torch::jit::Block* sub : node->blocks()) n += countNodes(sub);
  }
  return n;
}

bool runPattern(std::shared_ptr<torch::jit::Graph>& graph, Pattern& pattern) {
  Rewriter rw(graph, pattern);
  rw.walk(graph->block());
  return rw.changed_;
}

namespace {

bool isDead(Node* n) {
  if (n->outputs().empty() || !n->blocks().empty()) return false;
  for (const torch::jit::Value* v : n->outputs())
    if (v->hasUses()) return false;
  if (n->hasSideEffects()) return false;
  const c10::FunctionSchema* s = n->maybeSchema();
  return !(s && s->is_mutable());
}

void eraseDeadCode(torch::jit::Block* block) {
  auto nodes = block->nodes().reverse();
  for (auto it = nodes.begin(); it != nodes.end(); ++it) {
    for (torch::jit::Block* sub : it->blocks()) eraseDeadCode(sub);
    if (isDead(*it)) it.destroyCurrent();
  }
}

}  // namespace

void eraseDeadCode(std::shared_ptr<torch::jit::Graph>& graph) { eraseDeadCode(graph->block()); }

}  // namespace tsfuse
