// Where fusion may start: whether a block holds anything a fusion could start from, and which
// node looks like the start of a fused region (heuristics for the executor's first-call mode and
// its skip of graphs with nothing to fuse; never a gate on the passes themselves).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace tsfuse {

// Whether `block` (nested blocks included) holds a node a fusion could start from: a matched
// elementwise op (every fused region holds one, and canonicalize's and sink_views's rewrites
// start from one), a composite op decompose makes such ops of, or a call not yet inlined. Without
// one the pipeline can only rewrite spellings (identity slices, in-place ops) for nothing, so the
// executor pass leaves such graphs alone.
bool mayFuse(torch::jit::Block* block);

// Whether `n` looks like the start of a fused region: a matched elementwise op whose value an
// in-place op writes (canonicalize may make it functional), or that nothing but reductions,
// softmax and other elementwise ops read (through views and tuples; sizes may be read where it
// is reduced). A region of one op is not rewritten, and a value something else also reads is
// stored anyway, so a classifier's lone GELUs and residual adds do not start one.
bool startsRegion(torch::jit::Node* n);

// The first node of `block` (nested blocks included) that starts a fused region (startsRegion),
// or a call not yet inlined; nullptr if none. The executor uses this to choose first-call mode per
// method where it has no values to judge shapes by (registration/first_call.h; with them,
// passes/analysis/broadcast_probe.h): a heuristic, never a gate on the pass itself (a miss fuses that
// method from its second call instead of its first).
torch::jit::Node* firstFusionCandidate(torch::jit::Block* block);

}  // namespace tsfuse
