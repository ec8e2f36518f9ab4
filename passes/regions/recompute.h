// The recompute policy: when a region computes once more a value other readers also read, rather
// than reading it stored. Only a broadcast value of at most 32 ops qualifies, each cheap or computed
// at a narrower value's shape: recomputing those per reader costs less than storing the broadcast
// value (its whole size, a write and a read per reader).
#pragma once

#include "passes/analysis/op_table.h"
#include "passes/regions/region.h"

#include <vector>

namespace tsfuse {

// An op the compiled kernels compute with their own instructions (arithmetic, min/max, clamps,
// compares, where, casts): recomputing it per reader costs less than storing a broadcast value.
bool cheapToRecompute(Op op);
// Whether every reader of v, in v's block, is one the passes fuse (an elementwise op or a
// reduction of v itself) or reads v's metadata alone, which fuse_pairwise serves from a stand-in
// once the fused readers have taken v's computation.
bool fusibleReaders(Value* v);
// Whether p's value is larger than each of its tensor operands, as far as the graph shows: by
// their complete sizes where the types have them, else by construction (an operand made by
// unsqueeze, x[:, None], or by sink_views' broadcast views, or itself such a value).
bool broadcasts(Node* p);

// Whether the nodes of r among `nodes` are few and cheap enough to compute once more: at most 32,
// each a cheap op or one over views of a single value (sink_views' views of its leaves, or an
// unsqueeze), which the CPU computes once per call at that value's shape (hoist.h).
bool cheaplyRecomputed(const Region& r, const std::vector<Node*>& nodes);

// Whether the whole region may be computed once more for another reader of its value rather
// than its value stored: a broadcast value of a few cheap ops.
bool recomputable(const Region& r);

}  // namespace tsfuse
