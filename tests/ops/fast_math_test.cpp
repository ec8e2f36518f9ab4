// Opt-in fast numerics (TSFUSE_FAST_MATH=1, kernels/backends/cpu/vml.h): fused exp, log, sqrt,
// atan, sin, cos and tanh of a broadcast value through SLEEF's routines, within torch.testing's
// default tolerance of eager's results (float32: rtol 1.3e-6, atol 1e-5; float64: 1e-7, 1e-7) and
// not eager's bits somewhere (so SLEEF's routine did run); a Gaussian kernel sum likewise. Run by
// the ctest fast_math, which sets the variable; skipped without it.
#include "test_util.h"

#include "kernels/backends/cpu/vml.h"
#include "tsfuse/ops.h"

#include <ATen/Context.h>

namespace ops_fast_math_test {

namespace {

using tsfuse_test::Gen;

::testing::AssertionResult withinTorchTolerance(const at::Tensor& want, const at::Tensor& got) {
  const bool f32 = want.scalar_type() == at::kFloat;
  const double rtol = f32 ? 1.3e-6 : 1e-7, atol = f32 ? 1e-5 : 1e-7;
  if (want.sizes() != got.sizes() || want.scalar_type() != got.scalar_type())
    return ::testing::AssertionFailure() << "shape or dtype differs";
  if (!at::isclose(got, want, rtol, atol, /*equal_nan=*/true).all().item<bool>())
    return ::testing::AssertionFailure() << "beyond rtol " << rtol << ", atol " << atol << ": max abs diff "
                                         << (got - want).abs().nan_to_num(0).max().item<double>();
  return ::testing::AssertionSuccess();
}

bool fastRoutinesHere() {
  const std::string isa = at::get_cpu_capability();
  return tsfuse::cpu::fastMath() && (isa == "AVX2" || isa == "AVX512");
}

}  // namespace

TEST(FastMath, TranscendentalsAreWithinTorchTolerance) {
  if (!fastRoutinesHere()) GTEST_SKIP() << "fast numerics off (the ctest fast_math sets TSFUSE_FAST_MATH=1) or no AVX2";
  Gen g(81);
  for (at::ScalarType dt : {at::kFloat, at::kDouble})
    for (const char* op : {"exp", "log", "sqrt", "atan", "sin", "cos", "tanh"}) {
      const bool positive = std::string(op) == "log" || std::string(op) == "sqrt";
      at::Tensor x = g.tensor({300, 1}, dt) * 4, y = g.tensor({1, 333}, dt) * 4;
      const std::string text =
          std::string("v1: sub($0, $1); ") + (positive ? "abs(%0); " : "") + op + (positive ? "(%1)" : "(%0)");
      at::Tensor v = x - y;
      if (positive) v = v.abs();
      const at::Tensor want = std::string(op) == "exp"    ? at::exp(v)
                              : std::string(op) == "log"  ? at::log(v)
                              : std::string(op) == "sqrt" ? at::sqrt(v)
                              : std::string(op) == "atan" ? at::atan(v)
                              : std::string(op) == "sin"  ? at::sin(v)
                              : std::string(op) == "cos"  ? at::cos(v)
                                                          : at::tanh(v);
      const at::Tensor got = tsfuse::pairwise({x, y}, text);
      EXPECT_TRUE(withinTorchTolerance(want, got)) << text << " " << dt;
      if (std::string(op) != "sqrt")  // SLEEF's sqrt may round as MKL's does on these values
        EXPECT_FALSE(at::equal(want, got)) << text << " " << dt << ": eager's bits, so not SLEEF's routine";
    }
}

TEST(FastMath, HyperbolicsAndExpm1AreWithinTorchTolerance) {
  if (!fastRoutinesHere()) GTEST_SKIP() << "fast numerics off (the ctest fast_math sets TSFUSE_FAST_MATH=1) or no AVX2";
  Gen g(83);
  struct Case {
    tsfuse::Op op;
    const char* text;  // over v = x - y in [-8, 8]: each op on its domain
    at::Tensor (*eager)(const at::Tensor&);
  };
  using tsfuse::Op;
  const Case cases[] = {
      {Op::Sinh, "sinh(%0)", [](const at::Tensor& v) { return at::sinh(v); }},
      {Op::Cosh, "cosh(%0)", [](const at::Tensor& v) { return at::cosh(v); }},
      {Op::Expm1, "expm1(%0)", [](const at::Tensor& v) { return at::expm1(v); }},
      {Op::Atanh, "div(%0, 9); atanh(%1)", [](const at::Tensor& v) { return at::atanh(v / 9); }},
  };
  for (at::ScalarType dt : {at::kFloat, at::kDouble})
    for (const Case& c : cases) {
      at::Tensor x = g.tensor({300, 1}, dt) * 4, y = g.tensor({1, 333}, dt) * 4;
      const std::string text = std::string("v1: sub($0, $1); ") + c.text;
      const at::Tensor want = c.eager(x - y), got = tsfuse::pairwise({x, y}, text);
      EXPECT_TRUE(withinTorchTolerance(want, got)) << text << " " << dt;
      EXPECT_TRUE(tsfuse::cpu::vmlRoutine(c.op, dt)) << text;  // SLEEF's, not ATen on tiles
    }
}

TEST(FastMath, GaussianKernelSumIsWithinTorchTolerance) {
  if (!fastRoutinesHere()) GTEST_SKIP() << "fast numerics off (the ctest fast_math sets TSFUSE_FAST_MATH=1) or no AVX2";
  Gen g(82);
  at::Tensor x = g.tensor({500, 1, 3}, at::kFloat), y = g.tensor({1, 700, 3}, at::kFloat);
  const at::Tensor want = at::exp(-((x - y) * (x - y)).sum(2) * 0.5).sum(1);
  const at::Tensor got = tsfuse::reduce({x, y}, "v1: sub($0, $1); mul(%0, %0)", "sum", std::vector<int64_t>{2}, false,
                                        std::nullopt, "v1: mul($0, -0.5); exp(%0)")
                             .sum(1);
  EXPECT_TRUE(withinTorchTolerance(want, got));
}

}  // namespace ops_fast_math_test
