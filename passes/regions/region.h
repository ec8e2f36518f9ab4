// Fusion regions: a maximal connected set of elementwise nodes in one block whose intermediate
// values are used only inside the set, with the expression that computes its value and the
// rewrite that replaces it by one tsfuse op. Shared by the fusion passes.
#pragma once

#include "passes/framework/driver.h"
#include "passes/analysis/op_table.h"

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tsfuse {

using torch::jit::AliasDb;
using torch::jit::Graph;

struct Region {
  std::vector<Node*> nodes;                // topological order; the last one produces the value
  std::vector<ElementwiseMatch> matches;   // parallel to nodes
  std::vector<Value*> operands;            // leaves (tensors, runtime numbers), in first-use order
  std::vector<std::string> boundary;       // why neighbouring nodes stayed outside
  Expr expr;
  std::vector<Node*> repeats;              // operand producers read as broadcasts (planBroadcastRepeats)
  // Nodes whose value other readers read too, recomputed in the region rather than read stored
  // (growRegion); they stay in the graph for those readers until those fuse as well.
  std::vector<Node*> recomputed;

  Node* root() const { return nodes.back(); }
};

// Grows the maximal region whose value is `root`'s output (root must match as elementwise).
// A producer joins when it is elementwise, in root's block, and every use of its value is
// already in the region; otherwise its value becomes an operand (it is computed anyway) unless
// it is a cheap broadcast value whose other readers all fuse too: then it is recomputed here
// rather than stored (Region::recomputed, said in the boundary notes), at most a few ops in all.
//
//   %d = aten::sub(%xu, %yu)                        %d = aten::sub(%xu, %yu)      (for %b's reader)
//   %a = aten::abs(%d)                  =>          %a = tsfuse::reduce([%xu, %yu], "v1: sub($0, $1); abs(%0)", ...)
//   %s = aten::sum(%a, ...)  ... %b = aten::mul(%d, %d) ...
Region growRegion(Node* root);

// An op the compiled kernels compute with their own instructions (arithmetic, min/max, clamps,
// compares, where, casts): recomputing it per reader costs less than storing a broadcast value.
bool cheapToRecompute(Op op);
// Whether every reader of v, in v's block, is one the passes fuse: an elementwise op or a
// reduction (of v itself). (A metadata read would keep v stored.)
bool fusibleReaders(Value* v);
// Whether p's value is larger than each of its tensor operands, as far as the graph shows: by
// their complete sizes where the types have them, else by construction (an operand made by
// unsqueeze, x[:, None], or by sink_views' broadcast views, or itself such a value).
bool broadcasts(Node* p, int depth = 0);

// Whether the whole region may be computed once more for another reader of its value rather
// than its value stored: a broadcast value of a few cheap ops.
bool recomputable(const Region& r);

// Erases the region's nodes that nothing reads any more (all but those kept for other readers).
void eraseRegionNodes(Rewriter& rw, const Region& r);

// Erases a fused op whose outputs nothing reads any more, then its operand list (its first
// input's prim::ListConstruct) where nothing else reads that.
void eraseFusedOp(Rewriter& rw, Node* fused);

// The region of exactly `nodes` (elementwise, one block): its expression, in node order, over its
// operands in first-use order.
Region regionOf(std::vector<Node*> nodes);

// The first node after `from` up to and including `to` (a later node of from's block), nested
// blocks included, that may write to memory one of `values` may alias; nullptr when none does.
// NB: only writes in that range can run between the reads the original nodes made (from `from`
// on) and the reads a fused op placed at `to` makes. A write before `from`, even inside a loop
// or branch of an enclosing block, runs before both; a write after `to` runs after both; a
// write in another block of an enclosing node (the other branch, a later loop iteration's
// tail) is not interleaved with one execution of the block either.
Node* writerBetween(const std::vector<Value*>& values, Node* from, Node* to, AliasDb& aliasDb);

// Why the region may not be replaced by one op placed just before `at` (the root, or a later
// node of the root's block: the reduction consuming it), or "" when it may.
// NB: the fused op reads every operand at `at`, the original nodes read them from the region's
// first node on. If an operand (or anything that may alias it, e.g. the tensor a chunk() view
// came from) may be written in between, the values it sees could differ from those the
// original nodes saw, so such regions are rejected; writes before the region (a buffer filled
// slice by slice, then read) or after `at` are harmless. In-place ops on the region's own
// intermediates are uses outside the region and so keep those producers out of it.
std::string regionHazard(const Region& r, Node* at, AliasDb& aliasDb);

// The region of `producer` for a fused op placed just before `consumer` (a node of its block
// that reads the region's value), or none when regionHazard forbids it; the rejection is then
// recorded against the consumer and the region's nodes.
std::optional<Region> hazardFreeRegion(Node* producer, Node* consumer, Rewriter& rw);

// The same for `values`, read by nodes from `first` on and by the fused op at `at`.
std::string readHazard(const std::vector<Value*>& values, Node* first, Node* at, AliasDb& aliasDb);

// Marks the operands that are x.repeat(reps) results read by the region alone: the fused op
// (placed before `at`) reads tsfuse::broadcast_repeat(x, reps, other operands) instead, the
// expanded view of x where that is the same tensor to the fused op (kernels/runtime/broadcast_views.cpp
// decides per call), so the repeated tensor is not stored. Returns what was marked, for the
// event. Call before the graph changes (it asks alias analysis).
// NB: the view reads x at `at` where the repeat copied it: nothing may write x in between.
std::string planBroadcastRepeats(Region& r, Node* at, AliasDb& aliasDb);

// Inserts the fused op's operand list (with the planned broadcast_repeat views) at the graph's
// insertion point.
Value* insertOperandList(Graph& g, const Region& r);

// Inserts a Tensor[] of `values` at the graph's insertion point: each runtime number among them
// (MatchedArg::number) read through tsfuse::wrapped_number, as ATen reads a Python number.
Value* insertTensorList(Graph& g, const std::vector<Value*>& values);

// Replaces the region (and `consumer`, the node whose output becomes the fused op's output: the
// root itself, or the reduction consuming it) with `op`(operands, expr, extra...), inserted where
// `consumer` was. Returns the fused node.
Node* rewriteRegion(Rewriter& rw, Region& r, Node* consumer, const char* op,
                    const std::vector<torch::jit::NamedValue>& extra);

// The elementwise ops after a reduction that consume its value alone: the longest run of them,
// in block order, whose values (the reduced one included) are read by nothing else but the last
// one, e.g. where(lt(d, 0.5), 0, d) reads d twice. As an expression over the reduced value ($0)
// and the ops' other operands ($1, ... = extra): a reduction's epilogue. An operand made by an
// elementwise op that only the epilogue reads joins it too, wherever it is in the block. `chain`
// is in block order.
struct Epilogue {
  std::vector<Node*> chain;
  Expr expr;
  std::vector<Value*> extra;  // tensors and runtime numbers
  // Why the walk stopped at a reader of the reduced value (or of a taken node) that it could not
  // take: "aten::div: scalar operand %s is not a constant"; empty where nothing stopped it. The
  // rewrite's event says it, so that --explain tells why the epilogue is no longer.
  std::string stop;
};
Epilogue planEpilogue(Value* reduced);

// The one of two nodes of a block that comes first: where a hazard window opens when an epilogue
// took producers from before the region.
inline Node* earlier(Node* a, Node* b) { return b->isBefore(a) ? b : a; }

}  // namespace tsfuse
