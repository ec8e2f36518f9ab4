// What the tsfuse::reduce_chain tests share: a chain's outputs through the op, and outputs compared
// one by one.
#pragma once

#include "test_util.h"

#include "kernels/runtime/chain.h"
#include "tsfuse/ops.h"

namespace tsfuse_test {

// tsfuse::reduce_chain, or reduce_chain_with_indices where the last stage has indices.
inline std::vector<at::Tensor> chained(const std::vector<at::Tensor>& ops, const std::string& expr,
                                       const std::vector<std::string>& stages) {
  if (tsfuse::Chain::parse(expr, stages).stages.back().withIndices()) {
    auto [v, i] = tsfuse::reduceChainWithIndices(ops, expr, stages);
    return {v, i};
  }
  return {tsfuse::reduceChain(ops, expr, stages)};
}

inline ::testing::AssertionResult sameAll(const std::vector<at::Tensor>& want, const std::vector<at::Tensor>& got,
                                          bool exact) {
  if (want.size() != got.size()) return ::testing::AssertionFailure() << "output counts differ";
  for (size_t i = 0; i < want.size(); ++i)
    if (auto r = sameTensor(want[i], got[i], exact); !r) return r << " (output " << i << ")";
  return ::testing::AssertionSuccess();
}

}  // namespace tsfuse_test
