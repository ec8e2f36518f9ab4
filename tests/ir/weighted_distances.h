// The weighted-distance graphs the epilogue and chain pass tests share: the squared distances of
// %x [N, 1, D] and %y [M, D] summed over D (%d [N, M]), then `body`, which may use %b3 (%b [M, K]
// unsqueezed to [1, M, K]) and the constants %mtwo (-2.0) and %half (0.5).
#pragma once

#include "ir_util.h"

namespace tsfuse_test {

inline std::shared_ptr<Graph> weightedDistances(const std::string& body) {
  return squaredDistancesThen("  %b3 : Tensor = aten::unsqueeze(%b, %zero)\n" + body, R"IR(
  %mtwo : float = prim::Constant[value=-2.]()
  %half : float = prim::Constant[value=0.5]()
)IR");
}

// The Gaussian kernel product with the weight matrix: (exp(-2 d)[:, :, None] * b[None]).sum(1).
inline const char* kKernelProduct = R"IR(
  %u : Tensor = aten::unsqueeze(%d, %two)
  %e : Tensor = aten::mul(%u, %mtwo)
  %k : Tensor = aten::exp(%e)
  %kb : Tensor = aten::mul(%k, %b3)
  %r : Tensor = aten::sum(%kb, %dims1, %false, %none)
  return (%r)
)IR";

// The same with the unsqueeze after the exp (sink_views pushes it down to %d).
inline const char* kKernelProductUnsqueezedLast = R"IR(
  %e : Tensor = aten::mul(%d, %mtwo)
  %k : Tensor = aten::exp(%e)
  %u : Tensor = aten::unsqueeze(%k, %two)
  %kb : Tensor = aten::mul(%u, %b3)
  %r : Tensor = aten::sum(%kb, %dims1, %false, %none)
  return (%r)
)IR";

// Such a graph as built (ref), just before the pass under test (fused) and after it (g): the pass
// keeps the fused graph's bits and the original's values (within a sum's rounding: tsfuse folds
// the weighted sum in its own order).
struct Rewritten {
  std::shared_ptr<Graph> g, ref, fused;
  PassRun run;  // the pass under test's

  ::testing::AssertionResult sameResults(const std::vector<c10::IValue>& inputs) const {
    if (auto r = sameOutputs(fused, g, inputs, /*exact=*/true); !r) return r << " (against the fused graph)";
    return sameOutputs(ref, g, inputs, /*exact=*/false);
  }
};

using GraphPass = std::function<bool(std::shared_ptr<Graph>&)>;

// weightedDistances(body), the passes `fusion` in order, then `pass`.
inline Rewritten rewriteWeighted(const std::string& body, const std::vector<GraphPass>& fusion, const GraphPass& pass) {
  Rewritten r;
  r.g = weightedDistances(body);
  r.ref = r.g->copy();
  for (const auto& f : fusion) runPass(r.g, f);
  r.fused = r.g->copy();
  r.run = runPass(r.g, pass);
  return r;
}

// Inputs of those graphs: x [n, 1, 3], y [m, 3], b [m, k].
inline std::vector<c10::IValue> weightedPoints(uint64_t seed, int64_t n, int64_t m, int64_t k,
                                               at::ScalarType t = at::kFloat) {
  Gen g(seed);
  return {g.tensor({n, 1, 3}, t), g.tensor({m, 3}, t), g.tensor({m, k}, t)};
}

}  // namespace tsfuse_test
