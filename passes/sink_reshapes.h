// sink_reshapes: broadcast dims flattened and restored. Code that calls a row-wise op on every
// pair spells the pairs as expanded copies, flattened:
//   xe = x[:, None, :].expand(n, k, d).reshape(-1, d)       # eager stores [n * k, d]
//   ye = y[None, :, :].expand(n, k, d).reshape(-1, d)
//   F.pairwise_distance(xe, ye).view(n, k).argmin(1)        # after decompose: sub, add, norm(-1)
// The reshapes move past the computation, which then reads the expanded views as broadcasts:
//   1. f(reshape(a, s), reshape(b, s), numbers) -> reshape(f(a, b, numbers), s) where a and b
//      provably have one shape (symbolic_shapes.h): elementwise ops commute with a reshape;
//      the first such rewrite over expand views keeps the reshape's error (tsfuse::check_reshape)
//   2. red(reshape(v, [-1, d]), dim=-1) -> reshape(red(v, dim=-1), [-1]) (or [-1, 1] with
//      keepdim) where v's last size is provably d: a reduction over the last dim commutes with
//      flattening the dims before it
//   3. view|reshape(reshape(r, [-1]), sizes) -> r where r's sizes provably are `sizes`
// and the region (sub, add, norm, argmin) fuses whole, storing nothing of [n, k, d] or [n * k, d].
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace tsfuse {

bool SinkReshapes(std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace tsfuse
