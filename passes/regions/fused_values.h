// What the passes read off the fused ops already in a graph: the reduction a fused reduction
// computes, its stages as a chain's, and a value seen through unsqueezes.
#pragma once

#include "kernels/reference/aten_eval.h"
#include "passes/analysis/op_table.h"

#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <string>
#include <vector>

namespace tsfuse {

extern const c10::Symbol kPairwiseOp;         // tsfuse::pairwise
extern const c10::Symbol kReduceOp;           // tsfuse::reduce
extern const c10::Symbol kReduceIndicesOp;    // tsfuse::reduce_with_indices
extern const c10::Symbol kChainOp;            // tsfuse::reduce_chain
extern const c10::Symbol kChainIndicesOp;     // tsfuse::reduce_chain_with_indices
extern const c10::Symbol kUnsqueezeHelperOp;  // tsfuse::broadcast_unsqueeze (sink_views)
extern const c10::Symbol kShapeOfOp;          // tsfuse::shape_of (fuse_broadcast_reduce)

// The expression text and reduction of a tsfuse::reduce or tsfuse::reduce_with_indices whose
// arguments after the operand list are constants; nullopt otherwise.
struct FusedReduction {
  std::string expr;
  ReduceSpec spec;
};
std::optional<FusedReduction> fusedReductionOf(torch::jit::Node* n);

// Whether `r` reduces every dim of a value of rank `rank` (nullopt: unknown): no dims given, none
// for amax/amin (ATen's rule), or as many as the rank.
bool reducesEveryDim(const ReduceSpec& r, std::optional<int64_t> rank);
// The same for a matched reduction, of its input's rank where its type knows it.
bool reducesEveryDim(const ReductionMatch& rm);

// The fused reduction a node computes, as the first stages of a chain (its operand list node, its
// expression and stage texts): a tsfuse::reduce or tsfuse::reduce_chain with constant arguments
// and a prim::ListConstruct operand list; nullopt otherwise.
struct Stages {
  torch::jit::Node* list = nullptr;
  std::string expr;
  std::vector<std::string> texts;
};
std::optional<Stages> stagesOf(torch::jit::Node* n);

// Inserts `kind`(operands, expr, texts) (a tsfuse::reduce_chain, _with_indices or reduce_sweep, its
// operand list before it) before `at`, with `at`'s source range; the caller sets the outputs' types.
torch::jit::Node* insertStagedOp(torch::jit::Graph& g, c10::Symbol kind, size_t outputs,
                                 const std::vector<torch::jit::Value*>& operands, const std::string& expr,
                                 const std::vector<std::string>& texts, torch::jit::Node* at);

// A value seen through unsqueezes: `view` is `base` after aten::unsqueeze(·, d) or sink_views'
// prim::ListUnpack(tsfuse::broadcast_unsqueeze([·], d, layout)) (one leaf: the same view, its
// layout expression over that one operand keeps the operand's layout), any number of times, with
// constant dims, each intermediate read by the next view alone. `views` are the nodes in between
// (the view's own node last), `dims` the unsqueezes in order; none when view is not such a view.
struct Unsqueezed {
  torch::jit::Value* base = nullptr;
  std::vector<torch::jit::Node*> views;
  std::vector<int64_t> dims;
};
Unsqueezed unsqueezedValue(torch::jit::Value* view);

}  // namespace tsfuse
