// unroll_accumulations: a `for k in range(<constant>)` loop whose body writes in place into a
// tensor made before the loop (`d += (x[:, None, k] - y[None, :, k]).abs()`, a per-coordinate
// accumulation) becomes its iterations, one after another, with k a constant in each. The writes
// are then in-place ops on a fresh tensor in one block, which canonicalize makes functional, and
// the whole accumulation one fused region (a traced model has it unrolled already).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// At most this many copies of the body's nodes in all (trip count x body size); a larger loop
// stays, with a rejection saying why, as does one whose trip count is not a constant or that may
// stop early (a break, or a while condition).
inline constexpr size_t kMaxUnrolledNodes = 512;

bool UnrollAccumulations(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
