// reduce_transposed: a reduction of a transposed intermediate reduces the intermediate, so the
// region that made it fuses with the reduction. Log-domain Sinkhorn spells its column update so:
//   v = eps * (log(nu) - torch.logsumexp(M(C, u, v).transpose(-2, -1), dim=-1)) + v
// where the transposed [B, N, M] value stayed stored; now it is one tsfuse::reduce over dim -2.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

// red(transpose(x, i, j), dims, keepdim) -> red(x, dims with i and j swapped, keepdim), and
// red(t(x), ...) for x provably of rank 2, where
//  * red is a reduction ATen computes with TensorIterator, which orders the dims it iterates by
//    their strides (sum, mean, prod, amax/amin, max/min(dim), argmax/argmin, any/all, logsumexp,
//    norm; not var/std, whose all-dims kernel reads a contiguous copy), so both forms fold the same
//    values in the same order;
//  * x is an elementwise op's result (dense: no two dims longer than 1 share a stride, so no tie
//    leaves the order to the dims' positions);
//  * the result's dims come out in the same order: the reduction takes both swapped dims, or all
//    dims (not argmax/argmin, whose index into the flattened operand follows the dims' order),
//    or one of two adjacent swapped dims without keepdim;
//  * i, j and dims name the same dims in both frames: one sign, or x's rank known.
// Returns whether the graph changed.
bool ReduceTransposed(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
