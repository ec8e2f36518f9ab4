// count_bool_sums: a sum of a bool value that no fused op computes (it is stored: the fusion
// passes have run) is that value's count. ATen's sum of bools first copies them into int64, 8 bytes
// each; count_nonzero (over every dim) and the fused op's count (over dims) read them in place and
// return the same int64.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// aten::sum(x, dtype=None), x provably bool -> aten::count_nonzero(x); aten::sum(x, dims, keepdim,
// dtype=None) -> tsfuse::reduce([x], "v1: to($0, bool)", "sum", dims, keepdim) where x may be a
// broadcast (made from tensors not provably of one shape). Runs after
// fuse_broadcast_reduce, before fuse_pairwise (x's comparisons are still ATen nodes then, which
// tell it is bool). Returns whether it changed.
bool CountBoolSums(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
