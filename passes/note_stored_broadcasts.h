#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// Changes nothing. After the fusion passes, records a rejection for each broadcast the graph
// still makes real, naming the node and why it stays, so that a method that stores a broadcast
// never reports "nothing to fuse" in silence (optimize-ts's summary, --explain, the report):
//   * a copy of an expanded value (reshape, flatten, contiguous, clone of an expand's result);
//   * a repeat or tile whose result an elementwise op or reduction reads (a broadcast spelled as
//     a copy);
//   * an elementwise op left unfused over operands that provably broadcast to an outer product,
//     read by an op no region holds;
//   * an op neither fused nor decomposed (cosine_similarity) over such operands.
// Returns false.
bool NoteStoredBroadcasts(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
