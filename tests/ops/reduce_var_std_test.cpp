// var/std ("var:<correction>", "std:<correction>") of a broadcast value against eager ATen:
// random shapes and dims, corrections below, at and above the count (inf/NaN as eager), NaN
// inputs, empty reduced dims, float64, float16 (the chunked path) and the errors eager raises;
// the vertical lanes' Welford loop (WelfordLanes) bit for bit WelfordAcc's one lane at a time.
#include "test_util.h"

#include "kernels/backends/cpu/reduce_parts.h"

namespace ops_reduce_var_std_test {

namespace {

using tsfuse_test::Gen;

at::Tensor eager(const at::Tensor& a, const at::Tensor& b, bool isStd, double correction, std::vector<int64_t> dims,
                 bool keepdim) {
  at::Tensor v = at::sub(a, b);
  return isStd ? at::std(v, dims, c10::Scalar(correction), keepdim)
               : at::var(v, dims, c10::Scalar(correction), keepdim);
}

std::string text(bool isStd, double correction) {
  return std::string(isStd ? "std:" : "var:") + tsfuse::floatText(correction);
}

TEST(ReduceVarStd, RandomBroadcastShapesAndCorrections) {
  Gen g(41);
  int checked = 0;
  for (int i = 0; i < 120; ++i) {
    const int64_t n = 1 + g.randint(0, 40), m = 1 + g.randint(0, 30), d = g.randint(0, 9);
    const at::ScalarType dt = i % 3 == 0 ? at::kDouble : (i % 7 == 0 ? at::kHalf : at::kFloat);
    at::Tensor a = g.tensor({n, 1, d}, dt), b = g.tensor({1, m, d}, dt);
    if (i % 5 == 0 && a.numel()) a.view(-1)[0] = std::numeric_limits<double>::quiet_NaN();
    const bool isStd = i % 2, keepdim = i % 4 == 1;
    const double correction = std::vector<double>{0.0, 1.0, 2.0, 0.5, 9.0}[i % 5];
    const std::vector<std::vector<int64_t>> dimsChoices = {{-1}, {1}, {0, 2}, {0, 1, 2}};
    const std::vector<int64_t> dims = dimsChoices[i % 4];
    at::Tensor want = eager(a, b, isStd, correction, dims, keepdim);
    at::Tensor got = tsfuse::reduce({a, b}, "v1: sub($0, $1)", text(isStd, correction), dims, keepdim);
    ASSERT_EQ(got.sizes(), want.sizes()) << i;
    ASSERT_EQ(got.scalar_type(), want.scalar_type()) << i;
    const double tol = dt == at::kHalf ? 1e-3 : 1e-6;
    EXPECT_TRUE(at::allclose(got.to(at::kDouble), want.to(at::kDouble), tol, tol, /*equal_nan=*/true))
        << i << " " << text(isStd, correction) << " dims " << dims << "\n"
        << got << "\n"
        << want;
    ++checked;
  }
  EXPECT_EQ(checked, 120);
}

TEST(ReduceVarStd, EdgeCountsAndErrors) {
  Gen g(42);
  at::Tensor a = g.tensor({4, 1, 3}, at::kFloat), b = g.tensor({1, 5, 3}, at::kFloat);
  // One element per output: correction 1 divides by zero (NaN for zero spread, as eager).
  for (double c : {0.0, 1.0, 3.0, 4.0}) {
    at::Tensor got = tsfuse::reduce({a, b}, "v1: sub($0, $1)", text(false, c), std::vector<int64_t>{2});
    EXPECT_TRUE(at::allclose(got, eager(a, b, false, c, {2}, false), 1e-6, 1e-6, true)) << c;
  }
  // An empty reduced dim gives NaN, like eager.
  at::Tensor e = g.tensor({4, 1, 0}, at::kFloat), f = g.tensor({1, 5, 0}, at::kFloat);
  at::Tensor got = tsfuse::reduce({e, f}, "v1: sub($0, $1)", "std:1.0", std::vector<int64_t>{2});
  EXPECT_TRUE(at::allclose(got, eager(e, f, true, 1.0, {2}, false), 0, 0, true));
  // Integer values: eager's own error.
  at::Tensor i = g.tensor({4, 1, 3}, at::kInt), j = g.tensor({1, 5, 3}, at::kInt);
  EXPECT_THROW(tsfuse::reduce({i, j}, "v1: sub($0, $1)", "var:1.0", std::vector<int64_t>{2}), c10::Error);
}

template <typename T>
void expectLanesAreWelfordAcc(at::ScalarType dt) {
  Gen g(31);
  const int64_t lanes = 37, rows = 50;
  at::Tensor v = g.tensor({rows, lanes}, dt) * 1000 + 3;  // a mean far from 0
  v[7][3] = std::numeric_limits<double>::quiet_NaN(), v[9][5] = std::numeric_limits<double>::infinity();
  const T* data = v.const_data_ptr<T>();
  tsfuse::cpu::reduce_parts::WelfordLanes<T> lanesAcc;
  lanesAcc.reset(lanes);
  std::vector<tsfuse::cpu::WelfordAcc<T>> one(lanes, tsfuse::cpu::WelfordAcc<T>(1.0, false));
  for (int64_t r = 0; r < rows; ++r) {
    lanesAcc.add(data + r * lanes, lanes);
    for (int64_t k = 0; k < lanes; ++k) one[k].add(data[r * lanes + k], r);
  }
  std::vector<tsfuse::cpu::WelfordAcc<T>> got(lanes, tsfuse::cpu::WelfordAcc<T>(1.0, false));
  lanesAcc.into(got.data(), lanes);
  auto same = [](double a, double b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 8) == 0; };
  for (int64_t k = 0; k < lanes; ++k)
    EXPECT_TRUE(same(one[k].mean, got[k].mean) && same(one[k].m2, got[k].m2) && one[k].n == got[k].n)
        << dt << " lane " << k;
}

}  // namespace

TEST(ReduceVarStd, VerticalLanesAreWelfordAccBitForBit) {
  expectLanesAreWelfordAcc<float>(at::kFloat);
  expectLanesAreWelfordAcc<double>(at::kDouble);
}

}  // namespace ops_reduce_var_std_test
