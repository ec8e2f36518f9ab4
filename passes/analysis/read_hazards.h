// Read hazards: whether an in-place op may write values (or what they alias) between the reads the
// original nodes made and the later reads of the fused op that replaces them.
#pragma once

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include <string>
#include <vector>

namespace tsfuse {

using torch::jit::AliasDb;
using torch::jit::Node;
using torch::jit::Value;

// The first node after `from` up to and including `to` (a later node of from's block), nested
// blocks included, that may write to memory one of `values` may alias; nullptr when none does.
// NB: only writes in that range can run between the reads the original nodes made (from `from`
// on) and the reads a fused op placed at `to` makes. A write before `from`, even inside a loop
// or branch of an enclosing block, runs before both; a write after `to` runs after both; a
// write in another block of an enclosing node (the other branch, a later loop iteration's
// tail) is not interleaved with one execution of the block either.
Node* writerBetween(const std::vector<Value*>& values, Node* from, Node* to, AliasDb& aliasDb);

// Why a fused op placed at `at` may not read `values` that nodes read from `first` on (an in-place
// op between them may write one of them, or what it may alias: writerBetween), or "" when it may.
std::string readHazard(const std::vector<Value*>& values, Node* first, Node* at, AliasDb& aliasDb);

// The one of two nodes of a block that comes first: where a hazard window opens when an epilogue
// took producers from before the region.
inline Node* earlier(Node* a, Node* b) { return b->isBefore(a) ? b : a; }

}  // namespace tsfuse
