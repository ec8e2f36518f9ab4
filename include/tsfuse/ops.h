// C++ entry points of the fused ops (they go through the dispatcher, like torch.ops.tsfuse.*).
//
//   tsfuse::pairwise(Tensor[] operands, str expr, int[] donated=[]) -> Tensor
//   tsfuse::reduce(Tensor[] operands, str expr, str reduction, int[]? dim=None,
//                  bool keepdim=False, ScalarType? dtype=None, str? epilogue=None,
//                  int[] donated=[]) -> Tensor
//   tsfuse::reduce_with_indices(Tensor[] operands, str expr, str reduction, int dim,
//                               bool keepdim=False) -> (Tensor values, Tensor indices)
//   tsfuse::softmax(Tensor[] operands, str expr, int dim, bool log=False) -> Tensor
//   tsfuse::reduce_chain(Tensor[] operands, str expr, str[] stages) -> Tensor
//   tsfuse::reduce_chain_with_indices(Tensor[] operands, str expr, str[] stages)
//                                    -> (Tensor values, Tensor indices)
//   tsfuse::reduce_sweep(Tensor[] operands, str expr, str[] stages) -> Tensor[]
//
// `reduction` is sum, mean, prod, amax, amin, any, all, argmax, argmin, logsumexp or norm:<p>
// (torch.linalg.vector_norm's ord: "norm:2.0", "norm:inf", "norm:0.0"); reduce_with_indices takes
// max or min (torch.max/min(x, dim)). `epilogue` is an expression applied to the reduced value:
// its $0 is the reduced value, $k (k >= 1) the operand after the expression's own k-1 others, e.g.
// reduce([a, b, w], "v1: sub($0, $1); pow(%0, 2)", "sum", [-1], False, None, "v1: sqrt($0); mul(%0, $1)")
// computes sqrt(((a - b) ** 2).sum(-1)) * w. `donated` lists operands the caller gives up: the
// op may write its elementwise result over one of them where nothing else holds it (the graph
// pass sets it for operands no later node reads; these C++ entry points never donate). softmax
// is torch.softmax (log: torch.log_softmax) of the expression's value along dim, within the
// reduction tolerance where the value broadcasts beyond its operands (the value is never
// stored), else exactly ATen's. reduce_chain reduces a reduction's value again without storing it:
// stage 0 is a reduce's "sum(dim=[2], keepdim=False)" (with " |> " and its epilogue if any), each
// later stage a reduction of the previous stage's value in the same form, e.g.
// reduce_chain([x, y], "v1: sub($0, $1); mul(%0, %0)", {"sum(dim=[2], keepdim=False)",
// "argmin(dim=[1], keepdim=False)"}) is ((x - y) ** 2).sum(2).argmin(1) for x [N, 1, D], y [M, D];
// operands of each stage's epilogue follow the previous stage's. A later stage may also be
// "softmax(dim=1)", "log_softmax(dim=1)" or "div_sum(dim=1)": torch.softmax / log_softmax of the
// previous stage's value, or v / v.sum(1, keepdim=True), with ATen's bits (soft assignment: the
// [N, M] distances flow slab by slab into it).
// reduce_sweep's stages after the
// first are branches that each reduce stage 0's value (one output each, in one sweep: Chamfer's
// row and column minima).
//
// `expr` is the text form of tsfuse::Expr (kernels/ir/expr.h). The result is exactly what
// evaluating the expression with eager ATen ops (then the reduction) returns: same dtype, shape,
// strides, values (float elementwise ops bit-identical; reductions within rounding), same errors.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

namespace tsfuse {

at::Tensor pairwise(at::TensorList operands, const std::string& expr);
at::Tensor reduce(at::TensorList operands, const std::string& expr, const std::string& reduction,
                  std::optional<std::vector<int64_t>> dim = std::nullopt, bool keepdim = false,
                  std::optional<c10::ScalarType> dtype = std::nullopt,
                  const std::optional<std::string>& epilogue = std::nullopt);
// With an epilogue, its value over ($0 values, $1 indices, $2... the operands after the
// expression's own) is the second output instead of the indices.
std::tuple<at::Tensor, at::Tensor> reduceWithIndices(at::TensorList operands, const std::string& expr,
                                                     const std::string& reduction, int64_t dim, bool keepdim = false,
                                                     const std::optional<std::string>& epilogue = std::nullopt);
at::Tensor softmax(at::TensorList operands, const std::string& expr, int64_t dim, bool log = false);
at::Tensor reduceChain(at::TensorList operands, const std::string& expr, const std::vector<std::string>& stages);
std::tuple<at::Tensor, at::Tensor> reduceChainWithIndices(at::TensorList operands, const std::string& expr,
                                                          const std::vector<std::string>& stages);
std::vector<at::Tensor> reduceSweep(at::TensorList operands, const std::string& expr,
                                    const std::vector<std::string>& stages);

// Which implementation the last fused call on this thread used: "native", "chunked", "eager"
// (autograd or an error path), "empty", or "aten" (a float sum-like reduction of a value no
// larger than its largest operand: ATen's own fold order, so eager's bits). For tests and the
// explain tooling.
const char* lastPath();

// How fused work has run in this process so far (for tests and the corpus check that every fused
// program runs compiled code): tiles one compiled CPU kernel ran whole; tiles computed by compiled
// pieces (compiled runs with vector routine calls or interpreted instructions between them, or
// compiled values that a reduction folds in C++); tiles the CPU tile interpreter evaluated whole;
// single instructions it evaluated between compiled runs; ATen ops called on a tile; calls that
// ran ATen's ops on chunks; calls small enough to run as the ATen ops they fused. Also
// torch.ops.tsfuse.path_counts(), a dict keyed compiled_tiles, compiled_pieces, interpreted_tiles,
// interpreted_steps, aten_tile_ops, chunked_calls, small_calls.
struct PathCounts {
  int64_t compiledTiles = 0, compiledPieces = 0, interpretedTiles = 0, interpretedSteps = 0, atenTileOps = 0,
          chunkedCalls = 0, smallCalls = 0;
};
PathCounts pathCounts();

}  // namespace tsfuse
