// The pass driver (passes/framework/driver.h): the order in which it offers nodes, that each node is offered
// once even when rewrites insert and erase nodes around the cursor, that the alias database
// reflects the graph after each rewrite, and the events its rewriter records.
#include "ir_util.h"

#include "passes/framework/driver.h"

namespace ir_driver_test {

namespace {

using namespace tsfuse_test;
using torch::jit::Node;
using tsfuse::NestedBlocks;
using tsfuse::Rewriter;
using tsfuse::WalkOrder;

// Records the id of every node it is offered; `act` decides whether (and how) to rewrite.
class Recorder : public tsfuse::Pattern {
 public:
  using Act = std::function<bool(Node*, Rewriter&)>;
  Recorder(WalkOrder order, NestedBlocks nested, Act act = nullptr)
      : Pattern("recorder", order, nested), act_(std::move(act)) {}
  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    offered.push_back(tsfuse::nodeId(n));
    return act_ ? act_(n, rw) : false;
  }
  std::vector<std::string> offered;

 private:
  Act act_;
};

const char* kNested = R"IR(
graph(%a : Tensor, %c : bool):
  %one : int = prim::Constant[value=1]()
  %x : Tensor = aten::neg(%a)
  %r : Tensor = prim::If(%c)
    block0():
      %t : Tensor = aten::abs(%x)
      -> (%t)
    block1():
      %f : Tensor = aten::relu(%x)
      -> (%f)
  %y : Tensor = aten::sigmoid(%r)
  return (%y)
)IR";

std::vector<std::string> walk(WalkOrder order, NestedBlocks nested) {
  auto g = parseNamedGraph(kNested);
  Recorder p(order, nested);
  EXPECT_FALSE(tsfuse::runPattern(g, p));
  return p.offered;
}

using Ids = std::vector<std::string>;

TEST(PassDriver, OffersEveryNodeOnceInThePatternsOrder) {
  EXPECT_EQ(walk(WalkOrder::Forward, NestedBlocks::AtOwner), (Ids{"%one", "%x", "%t", "%f", "%r", "%y"}));
  EXPECT_EQ(walk(WalkOrder::Forward, NestedBlocks::First), (Ids{"%t", "%f", "%one", "%x", "%r", "%y"}));
  EXPECT_EQ(walk(WalkOrder::Reverse, NestedBlocks::AtOwner), (Ids{"%y", "%t", "%f", "%r", "%x", "%one"}));
  EXPECT_EQ(walk(WalkOrder::Reverse, NestedBlocks::First), (Ids{"%t", "%f", "%y", "%r", "%x", "%one"}));
}

const char* kChain = R"IR(
graph(%a : Tensor):
  %p : Tensor = aten::neg(%a)
  %q : Tensor = aten::abs(%a)
  %u : Tensor = aten::relu(%a)
  %v : Tensor = aten::sigmoid(%a)
  %w : Tensor = aten::exp(%a)
  return (%p, %w)
)IR";

// At %p the rewrite erases %q (the cursor) and %u, and inserts one node before the cursor and
// one at the end of the block: the walk goes on at %v, offers the node inserted at the end, and
// offers nothing twice (a node offered again could record its rejection twice).
TEST(PassDriver, ResumesAfterARewriteAndSkipsErasedNodes) {
  auto g = parseNamedGraph(kChain);
  Recorder p(WalkOrder::Forward, NestedBlocks::AtOwner, [](Node* n, Rewriter& rw) {
    if (n->kind() != c10::aten::neg) return false;
    Node* q = n->next();
    Node* u = q->next();
    rw.erase(q);
    rw.erase(u);
    Node* before = rw.graph().create(c10::aten::tanh, {n->input(0)});
    before->output()->setDebugName("before");
    before->insertAfter(n);
    Node* after = rw.graph().create(c10::aten::cos, {n->input(0)});
    after->output()->setDebugName("after");
    rw.graph().appendNode(after);
    return true;
  });
  EXPECT_TRUE(tsfuse::runPattern(g, p));
  EXPECT_EQ(p.offered, (Ids{"%p", "%v", "%w", "%after"}));
}

TEST(PassDriver, ReverseWalkMovesTheCursorOffErasedNodes) {
  auto g = parseNamedGraph(kChain);
  Recorder p(WalkOrder::Reverse, NestedBlocks::First, [](Node* n, Rewriter& rw) {
    if (n->kind() != c10::aten::sigmoid) return false;
    rw.erase(n->prev());  // %u, the cursor
    rw.erase(n);
    return true;
  });
  EXPECT_TRUE(tsfuse::runPattern(g, p));
  EXPECT_EQ(p.offered, (Ids{"%w", "%v", "%q", "%p"}));
}

// The pattern asks the alias database about %x before and after a rewrite removed %x's only
// writer: the answer after the rewrite comes from a database of the rewritten graph.
TEST(PassDriver, AliasDatabaseReflectsEachRewrite) {
  auto g = parseNamedGraph(R"IR(
graph(%a : Tensor, %b : Tensor):
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %x : Tensor = aten::add(%a, %b, %one)
  %m : Tensor = aten::mul_(%x, %two)
  %y : Tensor = aten::neg(%x)
  return (%y)
)IR");
  std::vector<bool> written;
  Recorder p(WalkOrder::Forward, NestedBlocks::AtOwner, [&](Node* n, Rewriter& rw) {
    if (n->kind() == c10::aten::add) written.push_back(rw.aliasDb().hasWriters(n->output()));
    if (n->kind() == c10::aten::neg) written.push_back(rw.aliasDb().hasWriters(n->input(0)));
    if (n->kind() != c10::aten::mul_) return false;
    rw.erase(n);
    return true;
  });
  EXPECT_TRUE(tsfuse::runPattern(g, p));
  EXPECT_EQ(written, (std::vector<bool>{true, false}));
}

// Rejections and rewrites become events of the pattern's pass, each node with its id.
TEST(PassDriver, RewriterRecordsEventsWithNodeIds) {
  auto g = parseNamedGraph(kChain);
  Recorder p(WalkOrder::Forward, NestedBlocks::AtOwner, [](Node* n, Rewriter& rw) {
    if (n->kind() == c10::aten::abs) return rw.notifyMatchFailure({n, n->prev()}, "not today");
    if (n->kind() != c10::aten::relu) return false;
    tsfuse::RewriteEvent e;
    e.add(n).add({n->next()});
    e.reason = "relu and sigmoid replaced";
    e.fusedOp = "aten::tanh";
    Node* t = rw.graph().create(c10::aten::tanh, {n->input(0)});
    t->output()->setDebugName("t");
    t->insertBefore(n);
    rw.notifyRewrite(std::move(e), t);
    rw.erase(n->next());
    rw.erase(n);
    return true;
  });
  PassRun r = runPass(g, [&](std::shared_ptr<Graph>& graph) { return tsfuse::runPattern(graph, p); });
  ASSERT_EQ(r.events.size(), 2u) << r.dump();
  const tsfuse::FusionEvent& reject = r.events[0];
  EXPECT_EQ(reject.kind, tsfuse::FusionEvent::Kind::Reject);
  EXPECT_EQ(reject.pass, "recorder");
  EXPECT_EQ(reject.reason, "not today");
  EXPECT_EQ(reject.nodeIds, (Ids{"%q", "%p"}));
  EXPECT_EQ(reject.nodes, (Ids{"aten::abs", "aten::neg"}));
  const tsfuse::FusionEvent& rewrite = r.events[1];
  EXPECT_EQ(rewrite.kind, tsfuse::FusionEvent::Kind::Rewrite);
  EXPECT_EQ(rewrite.nodeIds, (Ids{"%u", "%v"}));
  EXPECT_EQ(rewrite.fusedNode, "%t");
  EXPECT_EQ(rewrite.fusedOp, "aten::tanh");
  EXPECT_EQ(p.offered, (Ids{"%p", "%q", "%u", "%w"}));
}

// eraseDeadCode removes what a rewrite left dead, a chain in one walk, nested blocks included, and
// keeps what it cannot prove removable without alias analysis: dead writes, side effects, blocks.
TEST(PassDriver, EraseDeadCodeRemovesDeadPureNodesOnly) {
  auto g = parseNamedGraph(R"IR(
graph(%a : Tensor, %l : Tensor[], %c : bool):
  %one : int = prim::Constant[value=1]()
  %p : Tensor = aten::neg(%a)
  %q : Tensor = aten::abs(%p)
  %w : Tensor = aten::add_(%a, %a, %one)
  %x : Tensor[] = aten::append(%l, %a)
  %msg : str = prim::Constant[value="dead but warned"]()
  aten::warn(%msg, %one)
  %r : Tensor = prim::If(%c)
    block0():
      %s : Tensor = aten::sigmoid(%a)
      %t : Tensor = aten::tanh(%s)
      -> (%a)
    block1():
      -> (%a)
  %y : Tensor = aten::relu(%a)
  return (%y)
)IR");
  tsfuse::eraseDeadCode(g);
  EXPECT_TRUE(fileCheck(g->toString(), [](FileCheck& fc) {
    fc.check_not("aten::neg")->check_not("aten::abs")->check_not("aten::sigmoid")->check_not("aten::tanh");
  })) << *g;
  EXPECT_TRUE(fileCheck(g->toString(), [](FileCheck& fc) {
    fc.check("aten::add_")->check("aten::append")->check("aten::warn")->check("prim::If")->check("aten::relu");
  })) << *g;
}

}  // namespace

}  // namespace ir_driver_test
