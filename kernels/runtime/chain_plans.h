// The cache of one chain's slab plans (Chain::plan), keyed by planKey: steady-state calls of a
// model reuse theirs. Private to kernels/runtime/chain*.cpp.
#pragma once

#include "kernels/runtime/chain.h"

#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace tsfuse {

struct ChainPlans {
  std::mutex mu;
  std::map<std::vector<int64_t>, std::optional<SlabPlan>> plans;
};

}  // namespace tsfuse
