// The eager-order policy: a reduction whose bits depend on its fold order runs with ATen (eager's
// order) unless fusing it keeps a broadcast intermediate from being stored.
#pragma once

#include "kernels/reference/analysis.h"

#include <cstdint>

namespace tsfuse {

// Whether the expression's value has more elements than its largest operand holds (stride-0 dims
// count once): only then does fusing a reduction keep a broadcast intermediate from being stored.
bool broadcastsBeyondOperands(const Analysis& an, at::TensorList operands);
// The elements an operand's memory holds: a dim it broadcasts with stride 0 (an expanded view,
// e.g. a repeat read as a broadcast: passes/regions/repeats.h) holds one.
int64_t footprint(const at::Tensor& t);
// The most elements one of the operands holds (stride-0 dims counted once).
int64_t largestFootprint(at::TensorList operands);

// The policy, process-wide: on by default; TSFUSE_REDUCE_ORDER=any at load (or
// setKeepEagerOrder(false)) lets the fused kernels fold such reductions too (kernel tests do, to
// cover every layout).
bool keepsEagerOrder();
void setKeepEagerOrder(bool on);

}  // namespace tsfuse
