// Whether a region may be replaced by one op placed later in its block: no operand it reads may be
// written in between (passes/analysis/read_hazards.h), else the fused op could see other values than the nodes did.
#pragma once

#include "passes/framework/driver.h"
#include "passes/regions/region.h"

#include <torch/csrc/jit/ir/alias_analysis.h>

#include <optional>
#include <string>

namespace tsfuse {

using torch::jit::AliasDb;

// Why the region may not be replaced by one op placed just before `at` (the root, or a later
// node of the root's block: the reduction consuming it), or "" when it may.
// NB: the fused op reads every operand at `at`, the original nodes read them from the region's
// first node on. If an operand (or anything that may alias it, e.g. the tensor a chunk() view
// came from) may be written in between, the values it sees could differ from those the
// original nodes saw, so such regions are rejected; writes before the region (a buffer filled
// slice by slice, then read) or after `at` are harmless. In-place ops on the region's own
// intermediates are uses outside the region and so keep those producers out of it; one through an
// alias (y = x.to(x.dtype) is x itself, then y.mul_(0)) is a hazard too: the region would compute
// x afresh where its later readers saw the write.
std::string regionHazard(const Region& r, Node* at, AliasDb& aliasDb);

// The region of `producer` for a fused op placed just before `consumer` (a node of its block
// that reads the region's value), or none when regionHazard forbids it; the rejection is then
// recorded against the consumer and the region's nodes.
std::optional<Region> hazardFreeRegion(Node* producer, Node* consumer, Rewriter& rw);

}  // namespace tsfuse
