// Process-wide counts of how fused work ran, read by tests and by the corpus check that every
// fused program runs compiled code (tsfuse::pathCounts, include/tsfuse/ops.h).
#pragma once

#include <cstdint>

namespace tsfuse {

enum class PathCount : int {
  CompiledTiles,     // tiles one compiled CPU kernel ran whole (kernels/backends/cpu/jit)
  CompiledPieces,    // tiles computed by compiled runs with other steps between them, or whose
                     // compiled values C++ loops fold (kernels/backends/cpu/tile_eval.h)
  InterpretedTiles,  // tiles the CPU tile interpreter evaluated (TileProgram::runPrefix)
  InterpretedSteps,  // single instructions the interpreter evaluated between compiled runs
  AtenTileOps,       // ATen ops called on a CPU tile (an op with neither native code nor a routine)
  ChunkedCalls,      // calls that ran ATen's ops on chunks (kernels/backends/chunked)
  SmallCalls,        // calls small enough to run as the ATen ops they fused (kernels/runtime/small_call.h)
  kNum,
};

// Adds one. Counted per thread in its own cache line with a plain load and store (a shared counter
// would move its line between the cores on every tile; a locked add waits for the tile's stores):
// threads beyond the 64 slots share one and may then lose a count.
void countPath(PathCount c);
int64_t pathCount(PathCount c);

}  // namespace tsfuse
