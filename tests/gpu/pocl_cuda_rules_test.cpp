// The CUDA rules of the generated kernels, executed: the texts NVRTC compiles for the GPU
// (Target::device(), ATen's CUDA kernels' formulas where they differ from its CPU ones: reciprocal
// division by a host scalar, float16/bfloat16 in float with host scalars kept in float, signed
// zeros of minimum/maximum, clamp with tensor bounds) run on PoCL. References are written from
// ATen's CUDA kernels (BinaryDivTrueKernel.cu, MaxMinElementwiseKernel.cu, TensorCompare.cu, the
// opmath scalar of add/mul) with ATen ops on the CPU; a sweep over the registry's op forms and
// dtypes must stay within rounding of eager CPU. What only a GPU can tell (libdevice's
// transcendentals, PTX min/max on signed zeros) is in scripts/gpu_validate.sh.
#include "gpu_corpus.h"
#include "opencl_driver.h"

#include <cmath>

namespace {

using namespace tsfuse_gpu;
using namespace tsfuse_test;

struct Outcome {
  bool compiled = false;
  std::string why;
  at::Tensor value;
};

// The call's CUDA-rules kernel run on PoCL; not compiled (the reason in why) when it declines.
Outcome runCudaRules(const std::string& expr, const T& ops, std::optional<tsfuse::ReduceSpec> reduce = {}) {
  Outcome o;
  const GpuCase c{"cuda rules", expr, ops, reduce};
  Prepared p = prepare(c);
  if (!p.an) {
    o.why = "eager raises";
    return o;
  }
  ClDriver* d = ClDriver::get(&o.why);
  if (!d) {
    ADD_FAILURE() << o.why;
    return o;
  }
  auto k = tsfuse::cuda::kernelForCall(*p.e, ops, reduce ? &*reduce : nullptr, *p.an, *p.plan,
                                       tsfuse::cuda::CallOptions{}, &o.why);
  if (!k) return o;
  o.value = p.an->allocOut(at::kCPU);
  const tsfuse::cuda::LaunchShape s = tsfuse::cuda::launchShape(*k, 4);
  if (std::string err = d->run(*k, ops, {o.value}, s.blocks, s.threads); !err.empty()) {
    ADD_FAILURE() << expr << ": " << err << "\n" << k->source.text;
    return o;
  }
  o.compiled = true;
  return o;
}

struct Case {
  std::string expr;
  EagerFn eager;
  bool loose = false;  // transcendental
};

std::optional<at::Tensor> opt(const at::Tensor& t) { return t; }

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"v1: add($0, $1)", [](const T& x) { return at::add(x[0], x[1]); }},
      {"v1: sub($0, $1); abs(%0); lt(%1, 1)", [](const T& x) { return at::lt(at::abs(at::sub(x[0], x[1])), 1); }},
      {"v1: minimum($0, $1); maximum(%0, $0)", [](const T& x) { return at::maximum(at::minimum(x[0], x[1]), x[0]); }},
      {"v1: clamp($0, -1, 2); sub(%0, $1)", [](const T& x) { return at::sub(at::clamp(x[0], -1, 2), x[1]); }},
      {"v1: clamp($0, $1, None); mul(%0, 3)",
       [](const T& x) { return at::mul(at::clamp(x[0], opt(x[1]), std::nullopt), 3); }},
      {"v1: clamp($0, None, 0.5); mul(%0, $1)",
       [](const T& x) { return at::mul(at::clamp(x[0], std::nullopt, 0.5), x[1]); }},
      {"v1: gt($0, $1); where(%0, $0, $1)", [](const T& x) { return at::where(at::gt(x[0], x[1]), x[0], x[1]); }},
      {"v1: eq($0, $1); logical_not(%0); logical_or(%1, $0)",
       [](const T& x) { return at::logical_or(at::logical_not(at::eq(x[0], x[1])), x[0]); }},
      {"v1: div($0, $1)", [](const T& x) { return at::div(x[0], x[1]); }},
      {"v1: neg($0); relu(%0); add(%1, $1)", [](const T& x) { return at::add(at::relu(at::neg(x[0])), x[1]); }},
      {"v1: logical_xor($0, $1); logical_and(%0, $0)",
       [](const T& x) { return at::logical_and(at::logical_xor(x[0], x[1]), x[0]); }},
      {"v1: to($0, float64); div(%0, $1)", [](const T& x) { return at::div(x[0].to(at::kDouble), x[1]); }},
      {"v1: mul($0, 2.5); add(%0, 1); sub(%1, $1)",
       [](const T& x) { return at::sub(at::add(at::mul(x[0], 2.5), 1), x[1]); }},
      {"v1: sub(1, $0); mul(%0, $1)", [](const T& x) { return at::mul(at::rsub(x[0], 1), x[1]); }},
      {"v1: mul($0, $1); to(%0, int16); add(%1, 200)",
       [](const T& x) { return at::add(at::mul(x[0], x[1]).to(at::kShort), 200); }},
      {"v1: pow($0, 2); sub(%0, $1)", [](const T& x) { return at::sub(at::pow(x[0], 2), x[1]); }},  // base * base
      {"v1: sqrt($0); mul(%0, $1)", [](const T& x) { return at::mul(at::sqrt(x[0]), x[1]); }, true},
      {"v1: exp($0); add(%0, $1)", [](const T& x) { return at::add(at::exp(x[0]), x[1]); }, true},
      {"v1: sigmoid($0); mul(%0, $1)", [](const T& x) { return at::mul(at::sigmoid(x[0]), x[1]); }, true},
      {"v1: sub($0, $1); sin(%0); cos(%0); add(%1, %2)",
       [](const T& x) {
         auto d = at::sub(x[0], x[1]);
         return at::add(at::sin(d), at::cos(d));
       },
       true},
      {"v1: atan($0); tanh($1); mul(%0, %1)", [](const T& x) { return at::mul(at::atan(x[0]), at::tanh(x[1])); }, true},
  };
  return c;
}

// Every form x dtype once, on broadcast shapes and layouts: within rounding of eager CPU (exact
// where neither a host-scalar division nor a transcendental nor a half dtype is involved).
TEST(GeneratedKernelsCudaRules, MatchEagerWithinRounding) {
  Gen g(13);
  FailureLog log;
  int compiled = 0, runs = 0;
  const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kDouble, at::kInt,     at::kByte,
                                              at::kBool,  at::kHalf,   at::kBFloat16};
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{5, 1}, {1, 7}}, {{3, 1, 4}, {6, 4}}, {{}, {4, 5}}, {{4, 1, 6}, {}}, {{5, 6}, {6}}};
  for (const Case& c : cases())
    for (at::ScalarType dt : dtypes) {
      const auto& [s0, s1] = shapes[runs++ % shapes.size()];
      T ops = {g.layout(g.tensor(s0, dt), g.randint(0, 3)), g.layout(g.tensor(s1, dt), g.randint(0, 3))};
      at::Tensor want;
      const std::string err = errorOf([&] { want = c.eager(ops); });
      Outcome got = runCudaRules(c.expr, ops);
      if (!err.empty()) {
        log.add(got.compiled ? ::testing::AssertionFailure() << "eager raises \"" << err << "\" but a kernel ran"
                             : ::testing::AssertionSuccess());
        continue;
      }
      if (!got.compiled) continue;  // declined (e.g. integer true division): the chunked path runs
      ++compiled;
      const bool half = dt == at::kHalf || dt == at::kBFloat16;
      const bool floating = at::isFloatingType(want.scalar_type());
      const bool exact = !c.loose && !(floating && (half || c.expr.find("div") != std::string::npos));
      const double rtol = half ? 1e-2 : exact ? 0 : 1e-6;
      // A transcendental's ulp (math libraries apart) is absolute where a sum of them cancels.
      log.add(sameTensor(want.contiguous(), got.value.contiguous(), exact, rtol,
                         c.loose ? 1e-6 : 1e-300),  // values: the layout is the plan's
              c.expr + " dtype " + c10::toString(dt) + " on " + describeOperands(ops) + ": ");
    }
  EXPECT_TRUE(log.result());
  EXPECT_GT(compiled, static_cast<int>(dtypes.size() * cases().size() / 2));
}

TEST(GeneratedKernelsCudaRules, DivByHostScalarMultipliesByReciprocal) {
  Gen g(21);
  at::Tensor x = g.tensor({4096}, at::kFloat);
  Outcome got = runCudaRules("v1: div($0, 3.0)", {x});
  ASSERT_TRUE(got.compiled) << got.why;
  EXPECT_TRUE(sameTensor(at::mul(x, at::scalar_tensor(1.0f / 3.0f, at::kFloat)), got.value, true));
  // A 0-dim CPU operand is a host scalar on CUDA too.
  Outcome hs = runCudaRules("v1: div($0, $1)", {x, at::scalar_tensor(7.0, at::kDouble)});
  ASSERT_TRUE(hs.compiled) << hs.why;
  EXPECT_TRUE(sameTensor(at::mul(x, at::scalar_tensor(1.0f / 7.0f, at::kFloat)), hs.value, true));
  // A Python number known only at run time (tsfuse::wrapped_number) over an int tensor: float32
  // (a wrapped number does not promote to float64), the reciprocal taken in float.
  at::Tensor xi = g.tensor({4096}, at::kInt);
  Outcome wn = runCudaRules("v1: div($0, $1)", {xi, tsfuse::wrappedNumber(7.0)});
  ASSERT_TRUE(wn.compiled) << wn.why;
  EXPECT_EQ(wn.value.scalar_type(), at::kFloat);
  EXPECT_TRUE(sameTensor(at::mul(xi.to(at::kFloat), at::scalar_tensor(1.0f / 7.0f, at::kFloat)), wn.value, true));
}

TEST(GeneratedKernelsCudaRules, MinMaxOrderSignedZeros) {
  at::Tensor a = at::tensor({0.0, -0.0, 1.0, NAN, 2.0}, at::kFloat);
  at::Tensor b = at::tensor({-0.0, 0.0, NAN, 1.0, 2.0}, at::kFloat);
  Outcome mn = runCudaRules("v1: minimum($0, $1)", {a, b});
  Outcome mx = runCudaRules("v1: maximum($0, $1)", {a, b});
  ASSERT_TRUE(mn.compiled && mx.compiled);
  EXPECT_TRUE(sameTensor(at::tensor({-0.0, -0.0, NAN, NAN, 2.0}, at::kFloat), mn.value, true));
  EXPECT_TRUE(sameTensor(at::tensor({0.0, 0.0, NAN, NAN, 2.0}, at::kFloat), mx.value, true));
  Outcome ng = runCudaRules("v1: neg($0)", {a});  // -(+0.0) is -0.0
  EXPECT_TRUE(sameTensor(at::neg(a), ng.value, true));
}

TEST(GeneratedKernelsCudaRules, HalfTypesKeepHostScalarsInFloat) {
  Gen g(22);
  for (at::ScalarType dt : {at::kHalf, at::kBFloat16}) {
    at::Tensor x = g.tensor({2048}, dt, kNaNInf);
    const at::Tensor xf = x.to(at::kFloat), c = at::scalar_tensor(0.1f, at::kFloat);
    Outcome add = runCudaRules("v1: add($0, 0.1)", {x});
    Outcome mul = runCudaRules("v1: mul($0, 0.1)", {x});
    Outcome cmin = runCudaRules("v1: clamp($0, 0.1, None)", {x});
    ASSERT_TRUE(add.compiled && mul.compiled && cmin.compiled) << add.why << mul.why << cmin.why;
    EXPECT_TRUE(sameTensor(at::add(xf, c).to(dt), add.value, true)) << dt;
    EXPECT_TRUE(sameTensor(at::mul(xf, c).to(dt), mul.value, true)) << dt;
    EXPECT_TRUE(sameTensor(at::where(xf < c, c, xf).to(dt), cmin.value, true)) << dt;
    // Two tensors: float math, one rounding to the dtype (eager on either device).
    at::Tensor y = g.tensor({2048}, dt, kNaNInf);
    Outcome sub = runCudaRules("v1: sub($0, $1)", {x, y});
    ASSERT_TRUE(sub.compiled) << sub.why;
    EXPECT_TRUE(sameTensor(at::sub(x, y), sub.value, true)) << dt;
    // Casts to and from the half type round as c10 does (through float).
    Outcome cast = runCudaRules("v1: to($0, float64); mul(%0, 3); to(%1, float16); to(%2, bfloat16)", {x});
    ASSERT_TRUE(cast.compiled) << cast.why;
    EXPECT_TRUE(sameTensor(x.to(at::kDouble).mul(3).to(at::kHalf).to(at::kBFloat16), cast.value, true)) << dt;
  }
}

// Every float16 and bfloat16 bit pattern through the text's conversions: widening is exact, and
// narrowing a float (every float16 value, the midpoints between neighbours, and random floats)
// gives c10's round-to-nearest-even.
TEST(GeneratedKernelsCudaRules, HalfConversionsMatchC10) {
  for (at::ScalarType dt : {at::kHalf, at::kBFloat16}) {
    at::Tensor bits = at::arange(0, 65536, at::kInt).to(at::kShort).view(dt);
    Outcome widen = runCudaRules("v1: to($0, float32)", {bits});
    ASSERT_TRUE(widen.compiled) << widen.why;
    EXPECT_TRUE(sameTensor(bits.to(at::kFloat), widen.value, true)) << dt;
    at::Tensor f = bits.to(at::kFloat);
    at::Tensor mid = ((f.to(at::kDouble) + f.to(at::kDouble).roll(-1)) / 2).to(at::kFloat);
    Gen g(23);
    at::Tensor probe =
        at::cat({f, mid, g.tensor({65536}, at::kFloat, kNaNInf) * 1e3, g.tensor({4096}, at::kFloat) * 1e-6});
    Outcome narrow =
        runCudaRules(std::string("v1: to($0, ") + (dt == at::kHalf ? "float16" : "bfloat16") + ")", {probe});
    ASSERT_TRUE(narrow.compiled) << narrow.why;
    EXPECT_TRUE(sameTensor(probe.to(dt), narrow.value, true)) << dt;
  }
}

// The device's max/min as PTX defines them: a NaN operand is ignored, -0.0 orders below +0.0.
float ptxMax(float a, float b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b) || a > b) return a;
  return a == b && std::signbit(a) ? b : (a < b ? b : a);
}
float ptxMin(float a, float b) { return -ptxMax(-a, -b); }

// torch 2.11's CUDA clamp kernels (TensorCompare.cu): a NaN input passes, else the device's
// max/min. With both bounds a NaN of x, else lo, else hi wins. A signed zero comes out as
// the device's max/min gives it: clamp_min(-0.0, 0) and relu(-0.0) are +0.0 (eager CPU: -0.0).
TEST(GeneratedKernelsCudaRules, ClampFollowsTheDevicesMinMax) {
  const std::vector<float> xs = {-3.0f, 0.5f, NAN, 5.0f, 1.0f, -0.0f, 0.0f, -0.0f};
  const std::vector<float> los = {-1.0f, NAN, 0.0f, 0.0f, 2.0f, 0.0f, -0.0f, -0.0f};
  const std::vector<float> his = {1.0f, 1.0f, 1.0f, NAN, 1.5f, 1.0f, -0.0f, 0.0f};
  std::vector<float> both, lower, upper, relu;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float x = xs[i], lo = los[i], hi = his[i];
    both.push_back(std::isnan(x) ? x : std::isnan(lo) ? lo : std::isnan(hi) ? hi : ptxMin(ptxMax(x, lo), hi));
    lower.push_back(std::isnan(x) ? x : ptxMax(x, 0.0f));
    upper.push_back(std::isnan(x) ? x : ptxMin(x, -0.0f));
    relu.push_back(std::isnan(x) ? x : ptxMax(x, 0.0f));
  }
  const at::Tensor x = at::tensor(xs), lo = at::tensor(los), hi = at::tensor(his);
  const struct {
    const char* expr;
    const std::vector<float>* want;
    T ops;
  } cases[] = {{"v1: clamp($0, $1, $2)", &both, {x, lo, hi}},
               {"v1: clamp($0, 0.0, None)", &lower, {x}},
               {"v1: clamp($0, None, -0.0)", &upper, {x}},
               {"v1: relu($0)", &relu, {x}}};
  for (const auto& [expr, want, ops] : cases) {
    Outcome got = runCudaRules(expr, ops);
    ASSERT_TRUE(got.compiled) << expr << ": " << got.why;
    EXPECT_TRUE(sameTensor(at::tensor(*want), got.value, true)) << expr;
  }
  // Scalar bounds on both sides: the same kernel, the bounds literals.
  Outcome s = runCudaRules("v1: clamp($0, -0.0, 0.0)", {x});
  ASSERT_TRUE(s.compiled) << s.why;
  std::vector<float> sw;
  for (float v : xs) sw.push_back(std::isnan(v) ? v : ptxMin(ptxMax(v, -0.0f), 0.0f));
  EXPECT_TRUE(sameTensor(at::tensor(sw), s.value, true));
}

TEST(GeneratedKernelsCudaRules, HalfReductionsAccumulateWide) {
  Gen g(24);
  for (at::ScalarType dt : {at::kHalf, at::kBFloat16}) {
    at::Tensor a = g.tensor({64, 1}, dt), b = g.tensor({1, 300}, dt);
    Outcome s = runCudaRules("v1: sub($0, $1); abs(%0)", {a, b}, red(tsfuse::Reduction::Sum, std::vector<int64_t>{1}));
    ASSERT_TRUE(s.compiled) << s.why;
    EXPECT_TRUE(sameTensor(at::abs(a - b).to(at::kFloat).sum(1).to(dt), s.value, false, 1e-2, 1e-3)) << dt;
    Outcome m =
        runCudaRules("v1: sub($0, $1); abs(%0)", {a, b}, red(tsfuse::Reduction::Argmin, std::vector<int64_t>{1}));
    ASSERT_TRUE(m.compiled) << m.why;
    EXPECT_TRUE(sameTensor(at::abs(a - b).argmin(1), m.value, true)) << dt;
  }
}

TEST(GeneratedKernelsCudaRules, DeclinesOpsWithoutADevicePrimitive) {
  at::Tensor x = at::rand({3}), y = at::rand({3}) + 1;
  for (const char* e : {"v1: pow($0, $1)", "v1: div_floor($0, $1)", "v1: add_alpha($0, $1, 2)"}) {
    Outcome o = runCudaRules(e, {x, y});
    EXPECT_FALSE(o.compiled) << e;
    EXPECT_NE(o.why.find("no native form"), std::string::npos) << o.why;
  }
}

}  // namespace
