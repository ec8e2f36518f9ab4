// The one walk every graph pass runs on, and the one place its rewrites and rejections are recorded.
// A pass is a Pattern, offered each node of each block (nested ones included) once, in its
// direction: it rewrites, records a rejection, or declines. After a rewrite the walk goes on from
// the next node not yet offered, so patterns remove nodes only through Rewriter::erase; nodes a
// rewrite inserts ahead of the cursor are offered, those behind it are not. The alias database is
// built on first request and dropped after each rewrite unless it called Rewriter::keepAliasDb(),
// so a pattern asks all its alias questions before it edits the graph.
//   class Fuse : public Pattern { bool matchAndRewrite(Node* n, Rewriter& rw) override; };
//   bool FusePass(std::shared_ptr<Graph>& g) { Fuse p; return runPattern(g, p); }
#pragma once

#include "passes/framework/events.h"

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <vector>

namespace tsfuse {

using torch::jit::Node;

enum class WalkOrder {
  Forward,  // first node to last
  Reverse,  // last node to first (a region grows from its final consumer)
};

// When a node's nested blocks (prim::If, prim::Loop) are walked.
enum class NestedBlocks {
  AtOwner,  // when the walk reaches their owner, before the owner is offered
  First,    // all of a block's nested blocks, in node order, before the block's own walk
};

class Rewriter;

class Pattern {
 public:
  Pattern(const char* pass, WalkOrder order, NestedBlocks nested) : pass_(pass), order_(order), nested_(nested) {}
  virtual ~Pattern() = default;
  // Tries to rewrite at `n`. Returns whether the graph changed; events go through `rw`.
  virtual bool matchAndRewrite(Node* n, Rewriter& rw) = 0;

  const char* pass() const { return pass_; }
  WalkOrder order() const { return order_; }
  NestedBlocks nested() const { return nested_; }

 private:
  const char* pass_;
  WalkOrder order_;
  NestedBlocks nested_;
};

// A rewrite's event, assembled by its pattern. A node enters with its description and its id
// together, so the two lists the viewer pairs up by position cannot drift apart. Add the nodes a
// rewrite replaces before it destroys them.
class RewriteEvent {
 public:
  RewriteEvent& add(const Node* n);
  RewriteEvent& add(const std::vector<Node*>& nodes);
  size_t size() const { return nodes_.size(); }

  std::string reason;   // what was rewritten into what
  std::string expr;     // the fused expression, if any
  std::string fusedOp;  // e.g. "tsfuse::pairwise"

 private:
  friend class Rewriter;
  std::vector<std::string> nodes_, nodeIds_;
};

class Rewriter {
 public:
  torch::jit::Graph& graph() { return *graph_; }
  // Valid until the pattern's rewrite returns.
  torch::jit::AliasDb& aliasDb();

  // Records a rejected candidate (its nodes, why) and returns false, for `return rw.notifyMatchFailure(...)`.
  bool notifyMatchFailure(const std::vector<Node*>& nodes, std::string reason);
  // Records a rewrite; `fused` is the node that now computes what the event's nodes did (the
  // viewer links the replaced nodes to it).
  void notifyRewrite(RewriteEvent e, const Node* fused);

  // Destroys `n` (no uses left), moving the walk's cursor off it first.
  void erase(Node* n);

  // Replaces every use of `from` with `to`. Where the alias database is built, `to` takes over
  // what it knows of `from` (its memory location, the writes to it), so a database kept across
  // the rewrite (keepAliasDb) answers for `to` as it did for `from`. Call it before erasing
  // `from`'s node.
  void replaceAllUsesWith(torch::jit::Value* from, torch::jit::Value* to);
  // Records, where the alias database is built, that the new value `view` aliases `base` (shares
  // its memory location and the writes to it).
  void copyAliasing(torch::jit::Value* base, torch::jit::Value* view);

  // Says the rewrite being made keeps the alias database valid, so it is not rebuilt (each build
  // walks the whole graph). Only for a rewrite that leaves every alias and write answer about the
  // remaining values as it was: the nodes it erased wrote nothing, each value it created either
  // replaced one (replaceAllUsesWith) or is listed in `fresh`, and the `fresh` ones are new
  // tensors, or lists of tensors read only by the node it created, that nothing writes. Those are
  // added to the database as aliasing nothing (a list's elements are not recorded: no pattern asks
  // what a fused op's operand list contains). E.g. an identity view replaced by its base, or a
  // region replaced by one fused op.
  void keepAliasDb(std::vector<torch::jit::Value*> fresh = {}) {
    for (torch::jit::Value* v : fresh)
      TORCH_INTERNAL_ASSERT(v->type()->cast<c10::TensorType>() || v->type()->cast<c10::ListType>(),
                            "keepAliasDb: a fresh value must hold tensors");
    keepAliasDb_ = true;
    fresh_ = std::move(fresh);
  }

 private:
  friend bool runPattern(std::shared_ptr<torch::jit::Graph>& graph, Pattern& pattern);
  Rewriter(std::shared_ptr<torch::jit::Graph> graph, Pattern& pattern) : graph_(std::move(graph)), pattern_(pattern) {}
  void walk(torch::jit::Block* block);

  std::shared_ptr<torch::jit::Graph> graph_;
  Pattern& pattern_;
  std::unique_ptr<torch::jit::AliasDb> aliasDb_;
  std::vector<Node*> cursors_;  // per block being walked (nested walks stack): the next node to offer
  bool changed_ = false;
  bool keepAliasDb_ = false;
  std::vector<torch::jit::Value*> fresh_;  // keepAliasDb's values, added after the rewrite
};

// The nodes of `block`, nested blocks' included (for logs and benchmarks).
size_t countNodes(const torch::jit::Block* block);

// The node of `n`'s ancestry (n itself, or a node owning a block that holds it) that lies in
// `block`; nullptr when `block` does not hold n at any depth.
Node* ancestorIn(Node* n, const torch::jit::Block* block);

// Runs `pattern` over every block of `graph`. Returns whether any rewrite changed the graph.
bool runPattern(std::shared_ptr<torch::jit::Graph>& graph, Pattern& pattern);

// Removes the nodes a rewrite left dead: nodes whose results nothing reads, that own no block,
// have no side effect and write nothing (nested blocks' nodes included). One reverse walk: a
// node's readers come after it, so a chain of dead nodes goes in the same walk. Dead mutable ops
// and dead Ifs/Loops stay. Unlike torch's EliminateDeadCode, this builds no alias database and
// resolves no schema of a live node, both costly on a large graph's first call; the executor's own
// dead-code passes, which know aliasing, run before and after the pipeline.
void eraseDeadCode(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
