// Do no harm (kernels/runtime/fused_call.h, step 5): a float reduction whose bits depend on the fold order
// runs with ATen — eager's order, eager's bits — unless the value it reduces is a broadcast
// intermediate larger than every operand, the only case where fusing it saves memory. Order-free
// reductions (extrema, any/all, integer sums, norm order 0 and inf) always run fused.
#include "test_util.h"

namespace ops_reduce_order_policy_test {

namespace {

using tsfuse_test::AnyReduceOrder;
using tsfuse_test::Gen;

struct Call {
  at::Tensor out;
  std::string path;
};

Call reduce(const std::vector<at::Tensor>& ops, const std::string& expr, const std::string& kind,
            std::optional<std::vector<int64_t>> dim, std::optional<at::ScalarType> dtype = std::nullopt) {
  Call c;
  c.out = tsfuse::reduce(ops, expr, kind, dim, false, dtype);
  c.path = tsfuse::lastPath();
  return c;
}

TEST(ReduceOrderPolicy, FloatSumOfANonBroadcastValueIsEagersOwn) {
  Gen g(1);
  at::Tensor x = g.tensor({257, 37}, at::kFloat);
  Call c = reduce({x}, "v1: pow($0, 2)", "sum", std::vector<int64_t>{-1});
  EXPECT_EQ(c.path, "aten");
  EXPECT_TRUE(at::equal(c.out, x.pow(2).sum(-1)));  // bit for bit: the traced gpytorch-style norm

  c = reduce({x, g.tensor({257, 37}, at::kFloat)}, "v1: sub($0, $1); mul(%0, %0)", "mean", std::nullopt);
  EXPECT_EQ(c.path, "aten");
  c = reduce({x}, "v1: abs($0)", "norm:2.0", std::vector<int64_t>{0});
  EXPECT_EQ(c.path, "aten");
  c = reduce({x}, "v1: mul($0, 2)", "logsumexp", std::vector<int64_t>{1});
  EXPECT_EQ(c.path, "aten");
  // An integer value summed as float (dtype=) folds floats too.
  c = reduce({g.tensor({64, 9}, at::kInt)}, "v1: mul($0, 3)", "sum", std::vector<int64_t>{1}, at::kFloat);
  EXPECT_EQ(c.path, "aten");
}

TEST(ReduceOrderPolicy, ABroadcastIntermediateIsFused) {
  Gen g(2);
  at::Tensor x = g.tensor({64, 1, 3}, at::kFloat), y = g.tensor({1, 50, 3}, at::kFloat);
  Call c = reduce({x, y}, "v1: sub($0, $1); pow(%0, 2)", "sum", std::vector<int64_t>{-1});
  EXPECT_EQ(c.path, "native");
  EXPECT_TRUE(at::allclose(c.out, (x - y).pow(2).sum(-1), 1e-6, 1e-6));
  // One element more than the largest operand is enough: [2, 3] from [2, 1] and [1, 3]... and
  // from a [2, 3] operand plus a scalar-like one it is not.
  EXPECT_EQ(
      reduce({g.tensor({2, 1}, at::kFloat), g.tensor({1, 3}, at::kFloat)}, "v1: add($0, $1)", "sum", std::nullopt).path,
      "native");
  EXPECT_EQ(
      reduce({g.tensor({2, 3}, at::kFloat), g.tensor({1, 3}, at::kFloat)}, "v1: add($0, $1)", "sum", std::nullopt).path,
      "aten");
}

TEST(ReduceOrderPolicy, OrderFreeReductionsAreAlwaysFused) {
  Gen g(3);
  at::Tensor x = g.tensor({65, 33}, at::kFloat);
  for (const char* kind : {"amax", "amin", "any", "all", "norm:inf", "norm:-inf", "norm:0.0"}) {
    Call c = reduce({x}, "v1: mul($0, 2)", kind, std::vector<int64_t>{1});
    EXPECT_EQ(c.path, "native") << kind;
  }
  EXPECT_EQ(reduce({x}, "v1: mul($0, 2)", "argmax", std::vector<int64_t>{1}).path, "native");
  // Integer sums wrap the same in any order.
  EXPECT_EQ(reduce({g.tensor({65, 33}, at::kLong)}, "v1: mul($0, 3)", "sum", std::vector<int64_t>{1}).path, "native");
}

TEST(ReduceOrderPolicy, TheSwitchLetsKernelsFoldEveryLayout) {
  Gen g(4);
  at::Tensor x = g.tensor({40, 17}, at::kFloat);
  {
    AnyReduceOrder any;
    EXPECT_EQ(reduce({x}, "v1: pow($0, 2)", "sum", std::vector<int64_t>{-1}).path, "native");
  }
  EXPECT_EQ(reduce({x}, "v1: pow($0, 2)", "sum", std::vector<int64_t>{-1}).path, "aten");
}

}  // namespace

}  // namespace ops_reduce_order_policy_test
