// Fusion regions: a maximal connected set of elementwise nodes in one block whose intermediate
// values are used only inside the set, with the expression that computes its value and the
// rewrite that replaces it by one tsfuse op. Shared by the fusion passes.
#pragma once

#include "passes/driver.h"
#include "passes/op_table.h"

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <vector>

namespace tsfuse {

using torch::jit::AliasDb;
using torch::jit::Graph;

struct Region {
  std::vector<Node*> nodes;                // topological order; the last one produces the value
  std::vector<ElementwiseMatch> matches;   // parallel to nodes
  std::vector<Value*> operands;            // tensor leaves, in first-use order
  std::vector<std::string> boundary;       // why neighbouring nodes stayed outside
  Expr expr;

  Node* root() const { return nodes.back(); }
};

// Grows the maximal region whose value is `root`'s output (root must match as elementwise).
// A producer joins when it is elementwise, in root's block, and every use of its value is
// already in the region; otherwise its value becomes an operand (it is computed anyway).
Region growRegion(Node* root);

// Why the region may not be moved to its root's position, or "" when it may.
// NB: the fused op reads its operands where the region's root was. If an operand (or anything
// that may alias it, e.g. the tensor a chunk() view came from) is written by any in-place op,
// the values it sees could differ from those the original nodes saw, so such regions are
// rejected outright; in-place ops on the region's own intermediates are uses outside the
// region and so keep those producers out of it.
std::string regionHazard(const Region& r, AliasDb& aliasDb);

// Replaces the region (and `consumer`, the node whose output becomes the fused op's output: the
// root itself, or the reduction consuming it) with `op`(operands, expr, extra...), inserted where
// `consumer` was. Returns the fused node.
Node* rewriteRegion(Rewriter& rw, Region& r, Node* consumer, const char* op,
                    const std::vector<torch::jit::NamedValue>& extra);

}  // namespace tsfuse
