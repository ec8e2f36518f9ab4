#include "passes/unroll_accumulations.h"

#include "passes/analysis/op_table.h"
#include "passes/analysis/region_starts.h"
#include "passes/framework/driver.h"
#include "passes/framework/events.h"

#include <torch/csrc/jit/ir/constants.h>

#include <string>
#include <unordered_map>

namespace tsfuse {
namespace {

using torch::jit::Block;
using torch::jit::toIValue;
using torch::jit::Value;

// An in-place aten op in `block` (nested blocks included) that writes a tensor from an earlier
// iteration or from before the loop (made outside `body`, or carried into it), or nullptr.
Node* outerWrite(Block* block, Block* body) {
  for (Node* n : block->nodes()) {
    for (Block* sub : n->blocks())
      if (Node* w = outerWrite(sub, body)) return w;
    if (!isInPlaceAtenOp(n)) continue;
    Value* x = n->input(0);
    if (!ancestorIn(x->node(), body) || x->node() == body->param_node()) return n;
  }
  return nullptr;
}

// The loop, as a sketch (TorchScript's for-range: trip count, start condition true, the body's
// condition true, the carried values c):
//   %out = prim::Loop(%three, %true, %c0)
//     block0(%k : int, %c : Tensor):
//       %t = aten::select(%x1, %two, %k) ...
//       %w = aten::add_(%d, %e, %one)
//       -> (%true, %c1)
// becomes, for k = 0, 1, 2, the body's nodes cloned before the loop with %k the constant k and
// %c the previous copy's %c1; the loop's outputs are the last copy's.
struct UnrollAccumulationsPattern : Pattern {
  UnrollAccumulationsPattern() : Pattern("unroll_accumulations", WalkOrder::Forward, NestedBlocks::First) {}

  bool matchAndRewrite(Node* loop, Rewriter& rw) override {
    if (loop->kind() != c10::prim::Loop) return false;
    Block* body = loop->blocks()[0];
    Node* write = outerWrite(body, body);
    if (!write || !mayFuse(body)) return false;  // not an accumulation into a tensor outside it
    auto reject = [&](const std::string& why) {
      return rw.notifyMatchFailure({loop, write}, "loop kept: " + why + "; " + describeNode(write) +
                                                      " accumulates into a tensor made before it");
    };
    auto trips = toIValue(loop->input(0));
    auto starts = toIValue(loop->input(1));
    auto continues = toIValue(body->outputs()[0]);
    if (!trips || !trips->isInt()) return reject("its trip count is not a constant");
    if (!starts || !starts->isBool() || !starts->toBool() || !continues || !continues->isBool() || !continues->toBool())
      return reject("it may stop early (a break or a while condition)");
    const int64_t n = trips->toInt();
    if (n <= 0) return false;  // the body never runs: nothing to fuse
    const size_t size = countNodes(body);
    if (static_cast<size_t>(n) * size > kMaxUnrolledNodes)
      return reject(std::to_string(n) + " iterations of " + std::to_string(size) + " nodes exceed " +
                    std::to_string(kMaxUnrolledNodes) + " unrolled nodes");

    torch::jit::Graph& graph = rw.graph();
    torch::jit::WithInsertPoint guard(loop);
    std::vector<Value*> carried(loop->inputs().begin() + 2, loop->inputs().end());
    Node* writeAt = ancestorIn(write, body);  // the body's node that is or holds `write`
    Node* first = nullptr;                    // its first copy, the node the event points to
    for (int64_t k = 0; k < n; ++k) {
      std::unordered_map<Value*, Value*> env;
      env[body->inputs()[0]] = graph.insertConstant(k);
      for (size_t i = 0; i < carried.size(); ++i) env[body->inputs()[i + 1]] = carried[i];
      auto lookup = [&](Value* v) {
        auto it = env.find(v);
        return it == env.end() ? v : it->second;
      };
      for (Node* b : body->nodes()) {
        Node* copy = graph.insertNode(graph.createClone(b, lookup));
        if (!first && b == writeAt) first = copy;
        for (size_t i = 0; i < b->outputs().size(); ++i) {
          copy->output(i)->copyMetadata(b->output(i));
          env[b->output(i)] = copy->output(i);
        }
      }
      for (size_t i = 0; i < carried.size(); ++i) carried[i] = lookup(body->outputs()[i + 1]);
    }
    for (size_t i = 0; i < carried.size(); ++i) loop->output(i)->replaceAllUsesWith(carried[i]);
    RewriteEvent e;
    e.add(loop).add(write);
    e.fusedOp = std::to_string(n) + " copies of its body";
    e.reason = "unrolled " + std::to_string(n) + " iterations: " + describeNode(write) +
               " accumulates into a tensor made before the loop";
    rw.notifyRewrite(std::move(e), first);
    rw.erase(loop);
    return true;
  }
};

}  // namespace

bool UnrollAccumulations(std::shared_ptr<torch::jit::Graph>& graph) {
  UnrollAccumulationsPattern pattern;
  return runPattern(graph, pattern);
}

}  // namespace tsfuse
