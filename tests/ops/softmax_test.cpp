// tsfuse::softmax (softmax / log_softmax of a broadcast value) against eager ATen: random shapes,
// dims and dtypes, edge values (inf, -inf, NaN rows), empty dims, the exact ATen fallback where
// nothing broadcasts, float16, the errors eager raises, and autograd.
#include "test_util.h"

#include "kernels/backends/slabs.h"
#include "kernels/runtime/softmax.h"
#include "tsfuse/ops.h"

namespace ops_softmax_test {

namespace {

// Small values normally take ATen's softmax over the stored value; these tests run the fused
// sweeps on them (the limit itself: Softmax.SmallValuesAreStoredAndAtensSoftmaxRuns).
class Softmax : public ::testing::Test {
 protected:
  void SetUp() override { tsfuse::setSoftmaxStoredLimit(0); }
  void TearDown() override { tsfuse::setSoftmaxStoredLimit(tsfuse::kSlabElements); }
};

using tsfuse_test::Gen;

const char* kExpr = "v1: sub($0, $1); mul(%0, 3)";

at::Tensor eager(const at::Tensor& a, const at::Tensor& b, int64_t dim, bool log) {
  at::Tensor v = at::sub(a, b) * 3;
  return log ? at::log_softmax(v, dim) : at::softmax(v, dim);
}

TEST_F(Softmax, RandomBroadcastShapesAndDims) {
  Gen g(51);
  for (int i = 0; i < 120; ++i) {
    const int64_t n = 1 + g.randint(0, 40), m = 1 + g.randint(0, 30), d = 1 + g.randint(0, 9);
    const at::ScalarType dt = i % 3 == 0 ? at::kDouble : at::kFloat;
    at::Tensor a = g.tensor({n, 1, d}, dt), b = g.tensor({1, m, d}, dt);
    if (i % 4 == 1) a = a.transpose(0, 2).contiguous().transpose(0, 2);  // a permuted layout
    const int64_t dim = std::vector<int64_t>{-1, 0, 1, 2, -2}[i % 5];
    const bool log = i % 2;
    at::Tensor want = eager(a, b, dim, log);
    at::Tensor got = tsfuse::softmax({a, b}, kExpr, dim, log);
    if (n > 1 && m > 1) EXPECT_STREQ(tsfuse::lastPath(), "native") << i;
    ASSERT_EQ(got.sizes(), want.sizes()) << i;
    ASSERT_EQ(got.strides(), want.strides()) << i;
    ASSERT_EQ(got.scalar_type(), want.scalar_type()) << i;
    // log_softmax's x - (max + log(sum)) rounds at the value's magnitude: a sum folded in another
    // order moves it by a few ulps of max |value| (absolute), not of the (small) result.
    const double eps = dt == at::kDouble ? 2.2e-16 : 1.2e-7;
    const double atol = log ? 8 * eps * (1 + (at::sub(a, b) * 3).abs().max().item<double>()) : 1e-6;
    EXPECT_TRUE(at::allclose(got, want, 1e-5, atol))
        << i << " dim " << dim << " log " << log << " max diff " << (got - want).abs().max().item<double>() << " dtype "
        << dt << " n m d " << n << " " << m << " " << d;
  }
}

TEST_F(Softmax, EdgeValuesMatchEager) {
  // +-inf and NaN in a row: NaN rows (inf - inf) and zeros exactly where eager has them.
  at::Tensor a = at::tensor({0.0, -INFINITY, INFINITY, NAN}).view({4, 1, 1});
  at::Tensor b = at::tensor({0.0, 1.0, -INFINITY}).view({1, 3, 1});
  for (bool log : {false, true})
    for (int64_t dim : {0, 1}) {
      at::Tensor got = tsfuse::softmax({a, b}, kExpr, dim, log), want = eager(a, b, dim, log);
      EXPECT_TRUE(at::allclose(got, want, 1e-6, 1e-6, /*equal_nan=*/true)) << dim << log << "\n" << got << want;
      EXPECT_TRUE(at::equal(got.isnan(), want.isnan())) << dim << log;
    }
}

TEST_F(Softmax, SmallValuesAreStoredAndAtensSoftmaxRuns) {
  Gen g(54);
  at::Tensor a = g.tensor({20, 1, 4}, at::kFloat), b = g.tensor({1, 9, 4}, at::kFloat);
  tsfuse::setSoftmaxStoredLimit(tsfuse::kSlabElements);
  at::Tensor got = tsfuse::softmax({a, b}, kExpr, 1);
  const std::string small = tsfuse::lastPath();
  at::Tensor big1 = g.tensor({300, 1, 16}, at::kFloat), big2 = g.tensor({1, 64, 16}, at::kFloat);  // 307,200 values
  at::Tensor gotBig = tsfuse::softmax({big1, big2}, kExpr, 1);
  const std::string big = tsfuse::lastPath();
  tsfuse::setSoftmaxStoredLimit(0);
  EXPECT_EQ(small, "aten");
  EXPECT_TRUE(at::equal(got, eager(a, b, 1, false)));  // eager's bits
  EXPECT_EQ(big, "native");
  EXPECT_TRUE(at::allclose(gotBig, eager(big1, big2, 1, false), 1e-5, 1e-6));
}

TEST_F(Softmax, NoBroadcastIsExactlyAten) {
  // The value is as large as an operand: nothing to save, so ATen computes it (eager's bits).
  Gen g(52);
  at::Tensor a = g.tensor({30, 40}, at::kFloat), b = g.tensor({40}, at::kFloat);
  at::Tensor got = tsfuse::softmax({a, b}, kExpr, 1);
  EXPECT_STREQ(tsfuse::lastPath(), "aten");
  EXPECT_TRUE(at::equal(got, eager(a, b, 1, false)));
}

TEST_F(Softmax, OtherDtypesEmptyAndErrorsAreEagers) {
  Gen g(53);
  // float16 is computed by ATen (its softmax accumulates in float): exactly eager's.
  at::Tensor h = g.tensor({5, 1, 3}, at::kHalf), k = g.tensor({1, 4, 3}, at::kHalf);
  EXPECT_TRUE(at::equal(tsfuse::softmax({h, k}, kExpr, 1), eager(h, k, 1, false)));
  // An empty dim: eager's empty result.
  at::Tensor e = g.tensor({0, 1, 3}, at::kFloat), f = g.tensor({1, 4, 3}, at::kFloat);
  EXPECT_TRUE(at::equal(tsfuse::softmax({e, f}, kExpr, 1), eager(e, f, 1, false)));
  // Integer values and out-of-range dims raise eager's errors.
  at::Tensor i = g.tensor({5, 1, 3}, at::kInt), j = g.tensor({1, 4, 3}, at::kInt);
  EXPECT_THROW(tsfuse::softmax({i, j}, kExpr, 1), c10::Error);
  at::Tensor a = g.tensor({5, 1, 3}, at::kFloat), b = g.tensor({1, 4, 3}, at::kFloat);
  try {
    tsfuse::softmax({a, b}, kExpr, 3);
    ADD_FAILURE() << "dim 3 of a 3-d value did not raise";
  } catch (const c10::Error& err) {
    EXPECT_NE(std::string(err.what()).find("Dimension out of range"), std::string::npos) << err.what();
  }
}

TEST_F(Softmax, GradientFlowsThroughTheUnfusedOps) {
  Gen g(54);
  at::Tensor a = g.tensor({5, 1, 3}, at::kDouble).requires_grad_(), b = g.tensor({1, 4, 3}, at::kDouble);
  at::Tensor w = g.tensor({5, 4, 3}, at::kDouble);
  (tsfuse::softmax({a, b}, kExpr, 1) * w).sum().backward();
  at::Tensor a2 = a.detach().clone().requires_grad_();
  (eager(a2, b, 1, false) * w).sum().backward();
  EXPECT_TRUE(at::allclose(a.grad(), a2.grad(), 1e-12, 1e-12));
}

}  // namespace

}  // namespace ops_softmax_test
