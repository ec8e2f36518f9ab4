// Replacing a region by one tsfuse op (its operand list, the op, erasing the nodes it replaced), and
// erasing a fused op nothing reads any more.
#pragma once

#include "passes/framework/driver.h"
#include "passes/regions/region.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/named_value.h>

#include <unordered_map>
#include <vector>

namespace tsfuse {

using torch::jit::Graph;

// Inserts the fused op's operand list (with the planned broadcast_repeat views) at the graph's
// insertion point.
Value* insertOperandList(Graph& g, const Region& r);

// Inserts a Tensor[] of `values` at the graph's insertion point: each runtime number among them
// (MatchedArg::number) read through tsfuse::wrapped_number, as ATen reads a Python number.
Value* insertTensorList(Graph& g, const std::vector<Value*>& values);

// Replaces the region (and `consumer`, the node whose output becomes the fused op's output: the
// root itself, or the reduction consuming it) with `op`(operands, expr, extra...), inserted where
// `consumer` was. Returns the fused node.
//
//   %d = aten::sub(%x, %y)                   %l = prim::ListConstruct(%x, %y)
//   %a = aten::abs(%d)             =>        %a = tsfuse::<op>(%l, "v1: sub($0, $1); abs(%0)", extra...)
Node* rewriteRegion(Rewriter& rw, Region& r, Node* consumer, const char* op,
                    const std::vector<torch::jit::NamedValue>& extra);

// Erases the region's nodes and repeats that nothing reads any more (all but those kept for other
// readers: an intermediate recomputed for a reader outside, and the repeats it still reads).
void eraseRegionNodes(Rewriter& rw, const Region& r);

// Where `v`, the value of region `r`, has readers of its metadata alone (size, numel, dim, dtype,
// device, layout), they read a stand-in instead, so v itself need not be computed for them
// (torchvision's Matcher checks `iou.numel() == 0` before its max):
//
//   %v = aten::div(%a, %b)                    %v = aten::div(%a, %b)       (fused, unstored)
//   %n = aten::numel(%v)               =>     %s = tsfuse::shape_of([%a, %b], "v1: div($0, $1)")
//                                             %n = aten::numel(%s)
//
// tsfuse::shape_of runs where %v was computed and raises what computing it would have raised
// (kernels/runtime/shape_of.h). Returns how many readers now read it.
size_t readMetadataFromStandIn(Graph& g, const Region& r, Value* v);

// The same for a tsfuse::reduce's value, whose readers `readers` read its metadata alone: the
// stand-in, tsfuse::shape_of.reduced over the op's own arguments, goes before the op (an epilogue
// or a sweep takes its value's other readers, and the op is then erased or moved). Returns how many
// readers now read it.
size_t readReducedMetadataFromStandIn(Graph& g, Node* reduce, const std::vector<Node*>& readers);

// Clones `nodes` (one output each, in block order) at the graph's insertion point, with their
// source ranges: each clone reads the clones of the nodes before it and `map`'s replacements (any
// other input as it is). Returns `map` with each node's output mapped to its clone's.
std::unordered_map<Value*, Value*> cloneNodes(Graph& g, const std::vector<Node*>& nodes,
                                              std::unordered_map<Value*, Value*> map = {});

// Erases a fused op whose outputs nothing reads any more, then its operand list (its first
// input's prim::ListConstruct) where nothing else reads that.
void eraseFusedOp(Rewriter& rw, Node* fused);

}  // namespace tsfuse
