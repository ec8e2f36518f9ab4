// The reduction rules every backend folds with (kernels/backends/reduction_rules.h): the CPU accumulators
// add in index order (laterBeats), the CUDA kernels merge partials in any index order (beats);
// both must pick the element eager's argmax/argmin picks.
#include "test_util.h"

#include "kernels/backends/reduction_rules.h"

namespace ops_reduction_rules_test {

namespace {

// Folds values with the CPU rule (index order, laterBeats) and with the CUDA rule (a pairwise
// merge tree, partials compared by index with beats); both must return the same index.
template <typename U>
void checkArgRules(const std::vector<U>& v, bool isMax) {
  namespace rules = tsfuse::reduce_rules;
  int64_t inOrder = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i)
    if (inOrder < 0 || rules::laterBeats(v[i], v[inOrder], isMax)) inOrder = i;
  std::vector<int64_t> part(v.size());
  for (size_t i = 0; i < v.size(); ++i) part[i] = static_cast<int64_t>(i);
  while (part.size() > 1) {  // the later half merges into the earlier one, as a warp shuffle does
    const size_t half = (part.size() + 1) / 2;
    for (size_t i = 0; i + half < part.size(); ++i) {
      const int64_t o = part[i + half], a = part[i];
      if (rules::beats(v[o], o, v[a], a, isMax)) part[i] = o;
    }
    part.resize(half);
  }
  EXPECT_EQ(part[0], inOrder) << (isMax ? "argmax" : "argmin");
}

TEST(ReductionRules, ArgRulesAgreeInAnyOrder) {
  std::mt19937 rng(7);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40);
    std::vector<float> f(n);
    std::vector<int64_t> k(n);
    for (int i = 0; i < n; ++i) {
      const int r = static_cast<int>(rng() % 8);  // few distinct values: many ties
      f[i] = r == 7 && trial % 3 == 0 ? nan : static_cast<float>(r % 4);
      k[i] = r % 3;
    }
    for (bool isMax : {true, false}) {
      checkArgRules(f, isMax);
      checkArgRules(k, isMax);
    }
  }
}

TEST(ReductionRules, InOrderArgRuleIsEagers) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> v = {1, 3, nan, 3, nan, -2, -2};
  at::Tensor t = at::tensor(at::ArrayRef<float>(v));
  at::Tensor clean = at::tensor(at::ArrayRef<float>(std::vector<float>{1, 3, 0, 3, 0, -2, -2}));
  for (const at::Tensor& x : {t, clean})
    for (bool isMax : {true, false}) {
      int64_t best = -1;
      for (int64_t i = 0; i < x.numel(); ++i)
        if (best < 0 || tsfuse::reduce_rules::laterBeats(x[i].item<float>(), x[best].item<float>(), isMax)) best = i;
      EXPECT_EQ(best, (isMax ? x.argmax() : x.argmin()).item<int64_t>());
    }
}

}  // namespace

}  // namespace ops_reduction_rules_test
