// A fusion region: a maximal connected set of elementwise nodes in one block whose intermediate
// values are used only inside the set, with the expression that computes its value; how it grows
// from a root. Shared by the fusion passes (rewrite.h replaces a region by one tsfuse op).
#pragma once

#include "passes/analysis/op_table.h"

#include <torch/csrc/jit/ir/ir.h>

#include <string>
#include <vector>

namespace tsfuse {

struct Region {
  std::vector<Node*> nodes;               // topological order; the last one produces the value
  std::vector<ElementwiseMatch> matches;  // parallel to nodes
  std::vector<Value*> operands;           // leaves (tensors, runtime numbers), in first-use order
  std::vector<std::string> boundary;      // why neighbouring nodes stayed outside
  Expr expr;
  std::vector<Node*> repeats;  // operand producers read as broadcasts (planBroadcastRepeats)
  // Nodes whose value other readers read too, recomputed in the region rather than read stored
  // (growRegion); they stay in the graph for those readers until those fuse as well.
  std::vector<Node*> recomputed;

  Node* root() const { return nodes.back(); }
};

// Grows the maximal region whose value is `root`'s output (root must match as elementwise).
// A producer joins when it is elementwise, in root's block, and every use of its value is
// already in the region; otherwise its value becomes an operand (it is computed anyway) unless
// it is a cheap broadcast value whose other readers all fuse too: then it is recomputed here
// rather than stored (Region::recomputed, said in the boundary notes), within recompute.h's bound
// on the ops computed again: past it, the costliest is read stored and the others still recomputed.
//
//   %d = aten::sub(%xu, %yu)                        %d = aten::sub(%xu, %yu)      (for %b's reader)
//   %a = aten::abs(%d)                  =>          %a = tsfuse::reduce([%xu, %yu], "v1: sub($0, $1); abs(%0)", ...)
//   %s = aten::sum(%a, ...)  ... %b = aten::mul(%d, %d) ...
Region growRegion(Node* root);

// Per instruction of e, the operands it reads, directly or through the values it reads (1: read).
std::vector<std::vector<char>> operandsRead(const Expr& e);

// The region of exactly `nodes` (elementwise, one block): its expression, in node order, over its
// operands in first-use order.
Region regionOf(std::vector<Node*> nodes);

}  // namespace tsfuse
