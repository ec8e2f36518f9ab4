// Do no harm (kernels/runtime/fused_call.h, step 5): a float reduction whose bits depend on the fold order
// runs with ATen — eager's order, eager's bits — unless the value it reduces is a broadcast
// intermediate larger than every operand, the only case where fusing it saves memory, or the CPU
// kernels fold it in eager's own order (a sum along eager's innermost rows), or it is a logsumexp,
// run in eager's own steps. Order-free reductions (extrema, any/all, integer sums, norm order 0 and
// inf) always run fused.
#include "test_util.h"

#include "kernels/backends/cpu/row_sum.h"

#include <limits>

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
  Call c = reduce({x}, "v1: pow($0, 2)", "sum", std::vector<int64_t>{0});
  EXPECT_EQ(c.path, "aten");
  EXPECT_TRUE(at::equal(c.out, x.pow(2).sum(0)));

  c = reduce({x, g.tensor({257, 37}, at::kFloat)}, "v1: sub($0, $1); mul(%0, %0)", "mean", std::nullopt);
  EXPECT_EQ(c.path, "aten");
  c = reduce({x}, "v1: abs($0)", "norm:2.0", std::vector<int64_t>{0});
  EXPECT_EQ(c.path, "aten");
  // An integer value summed as float (dtype=) folds floats too.
  c = reduce({g.tensor({64, 9}, at::kInt)}, "v1: mul($0, 3)", "sum", std::vector<int64_t>{0}, at::kFloat);
  EXPECT_EQ(c.path, "aten");
}

// A sum along eager's innermost rows is folded natively in eager's order: short rows in the inner
// order (inner_sum.h), long ones gathered whole (row_sum.h, up to 2^18 values: bounded scratch); a
// single row of 32768 values or more may be split by ATen's threads, so it goes to ATen.
TEST(ReduceOrderPolicy, SumsAlongEagersRowsRunNativeInEagersOrder) {
  if (!tsfuse::cpu::eagerSumsRowsInCascade()) GTEST_SKIP() << "this build's at::sum does not follow the cascade";
  Gen g(3);
  for (at::ScalarType t : {at::kFloat, at::kDouble}) {
    for (int64_t n : {37, 3000, 40000}) {
      at::Tensor x = g.tensor({5, n}, t);
      Call c = reduce({x}, "v1: mul($0, $0)", "sum", std::vector<int64_t>{-1});
      EXPECT_EQ(c.path, "native") << n;
      EXPECT_TRUE(at::equal(c.out, (x * x).sum(-1))) << n << " " << t;
      // With an epilogue (a kernel regression's weighted sum over the weights' sum): the same fold,
      // then the epilogue over it.
      const at::Tensor y = g.tensor({1, n}, t), s = g.tensor({5}, t);
      const at::Tensor out = tsfuse::reduce({x, y, s}, "v1: mul($0, $1)", "sum", std::vector<int64_t>{-1}, false,
                                            std::nullopt, std::string("v1: div($0, $1)"));
      EXPECT_EQ(std::string(tsfuse::lastPath()), "native") << n;
      EXPECT_TRUE(at::equal(out, (x * y).sum(-1) / s)) << n << " " << t;
    }
    at::Tensor row = g.tensor({40000}, t);
    Call c = reduce({row}, "v1: mul($0, $0)", "sum", std::vector<int64_t>{0});
    EXPECT_EQ(c.path, "aten");
    EXPECT_TRUE(at::equal(c.out, (row * row).sum(0)));
    // Rows longer than a bounded scratch buffer holds: ATen's, too.
    at::Tensor longRows = g.tensor({2, 300000}, t);
    c = reduce({longRows}, "v1: mul($0, $0)", "sum", std::vector<int64_t>{1});
    EXPECT_EQ(c.path, "aten");
    EXPECT_TRUE(at::equal(c.out, (longRows * longRows).sum(1)));
  }
  // Rows of a transposed operand: eager's value follows its layout, so the rows are strided there.
  at::Tensor xt = g.tensor({3000, 6}, at::kFloat).t();
  Call c = reduce({xt}, "v1: mul($0, $0)", "sum", std::vector<int64_t>{-1});
  EXPECT_EQ(c.path, "aten");
  EXPECT_TRUE(at::equal(c.out, (xt * xt).sum(-1)));
}

// logsumexp over an operand-sized value (geomloss's softmin: h_j - C_ij / eps with C given) in the
// steps of eager's kernel (amax, infinities to 0, sum of exp, log + max): its bits, nothing of
// [B, N, M] stored. Along eager's rows the CPU kernel takes each row whole ("native"); along
// another dim two fused calls take the steps ("logsumexp").
TEST(ReduceOrderPolicy, LogsumexpOfAnOperandSizedValueIsEagersOwn) {
  if (!tsfuse::cpu::eagerSumsRowsInCascade()) GTEST_SKIP() << "this build's at::sum does not follow the cascade";
  Gen g(4);
  for (at::ScalarType t : {at::kFloat, at::kDouble}) {
    at::Tensor h = g.tensor({2, 1, 700}, t), cost = g.tensor({2, 30, 700}, t, tsfuse_test::kNaNInf);
    cost[1][3].fill_(-std::numeric_limits<double>::infinity());  // a row of -inf values: max -inf
    cost[0][4].fill_(std::numeric_limits<double>::infinity());   // and one of +inf
    const std::string expr = "v1: div($1, 0.1); sub($0, %0)";
    const at::Tensor v = h - cost / 0.1;
    for (int64_t dim : {2, 1}) {
      for (bool keepdim : {false, true}) {
        at::Tensor out = tsfuse::reduce({h, cost}, expr, "logsumexp", std::vector<int64_t>{dim}, keepdim);
        EXPECT_EQ(std::string(tsfuse::lastPath()), dim == 2 ? "native" : "logsumexp");
        const at::Tensor want = at::logsumexp(v, {dim}, keepdim);
        EXPECT_TRUE(at::equal(out.isnan(), want.isnan()));
        EXPECT_TRUE(at::equal(out.nan_to_num(0), want.nan_to_num(0))) << t << " dim " << dim << " " << keepdim;
      }
    }
    at::Tensor all = tsfuse::reduce({h, cost}, expr, "logsumexp", std::nullopt, false);
    EXPECT_TRUE(at::equal(all.nan_to_num(0), at::logsumexp(v, {0, 1, 2}).nan_to_num(0)));
  }
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
    EXPECT_EQ(reduce({x}, "v1: pow($0, 2)", "sum", std::vector<int64_t>{0}).path, "native");
  }
  EXPECT_EQ(reduce({x}, "v1: pow($0, 2)", "sum", std::vector<int64_t>{0}).path, "aten");
}

}  // namespace

}  // namespace ops_reduce_order_policy_test
