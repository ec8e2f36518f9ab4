// The native CPU drivers behind runNative (kernels/backends/cpu/native.cpp): the output's allocation, the
// map driver (map.cpp) and the reduce driver (reduce.cpp). Each walks the call's IterationPlan in
// tiles of kTile elements; nothing of the broadcast shape's size is ever allocated. Internal.
#pragma once

#include "kernels/backends/cpu/tile_program.h"
#include "kernels/reference/eval_fused.h"
#include "kernels/plan/iteration.h"

#include <string>

namespace tsfuse::cpu {

// The output, laid out as the analysis says; where the allocator hands it fresh pages, mapped as
// transparent huge pages instead (output.cpp).
at::Tensor allocOutput(const Analysis& an);

// The bytes of an output of `bytes` bytes that allocOutput backs with huge pages: every whole
// 2 MiB, and the last partial one where the bytes it maps past the output are at most 1/16 of a
// huge page or, for larger outputs, at most 1/16 of the output and half a huge page. The rest is
// 4 KiB pages, so resident memory stays within 1/16 of the output's size and 1 MiB of it. 0: the
// output stays with the allocator.
size_t hugePageBytes(size_t bytes);

// Writes the value of `prog` at every element of `out` (dense in plan.keptOrder).
void runMap(const TileProgram& prog, const IterationPlan& plan, at::Tensor& out);

// Reduces the value of `prog` into `out` (and its indices where the reduction returns them),
// through the reduction's epilogue if it has one. No outputs, with the reason in *why, where the
// epilogue does not lower.
Outputs runReduce(TileProgram& prog, const Expr& e, at::TensorList operands, const ReduceSpec& reduce,
                  const Analysis& an, const IterationPlan& plan, const at::Tensor& out, std::string* why);

// The same reduction, but each output row (the output's last dim, row-major float32) summed in
// eager's order (row_sum.h) into sums[row] as soon as its tiles are finished, never stored
// whole: a reduce_chain whose next stage sums that dim. Compiled vertical kernels only; false,
// with the reason in *why, elsewhere (nothing written then).
bool runReduceRowSums(TileProgram& prog, const Expr& e, at::TensorList operands, const ReduceSpec& reduce,
                      const Analysis& an, const IterationPlan& plan, at::Tensor& sums, std::string* why);

// Reductions whose tiles (compiled, or compiled pieces) ran along the output's second-innermost dim
// (reduce.cpp, swapsLanes) so far: tests check that the swap ran.
int64_t swappedLaneReductions();

// Operands copied so far with the lanes' dim innermost (reduce.cpp, relaidForLanes): tests check
// that a copy was made, or not.
int64_t relaidOperands();

}  // namespace tsfuse::cpu
