// Repeats read as broadcasts: an operand made by x.repeat(reps) and read by the region alone is read
// through a view of x by the fused op, so the repeated tensor is never stored.
#pragma once

#include "passes/regions/region.h"

#include <torch/csrc/jit/ir/alias_analysis.h>

#include <string>

namespace tsfuse {

using torch::jit::AliasDb;

// Marks the operands that are x.repeat(reps) results read by the region alone: the fused op
// (placed before `at`) reads tsfuse::broadcast_repeat(x, reps, other operands) instead, the
// expanded view of x where that is the same tensor to the fused op (kernels/runtime/broadcast_views.cpp
// decides per call), so the repeated tensor is not stored. Returns what was marked, for the
// event. Call before the graph changes (it asks alias analysis).
// NB: the view reads x at `at` where the repeat copied it: nothing may write x in between.
std::string planBroadcastRepeats(Region& r, Node* at, AliasDb& aliasDb);

}  // namespace tsfuse
