// GPU tests of the CUDA kernels (kernels/backends/cuda): each case runs tsfuse on CUDA tensors with the
// kernels on (TSFUSE_CUDA_KERNELS=1, the default) and compares with eager CUDA (same ATen ops on the same
// tensors) and with the CPU path; the kernel path must be "native". Without a GPU every test
// skips with a message (CI).
#include "test_util.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/bit_cast.h>
#include <torch/cuda.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace cuda_cuda_kernels_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

struct OptIn {
  OptIn() { setenv("TSFUSE_CUDA_KERNELS", "1", 1); }
  ~OptIn() { unsetenv("TSFUSE_CUDA_KERNELS"); }
};

#define REQUIRE_GPU() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: GPU test skipped"

T toCuda(const T& ops) {
  T out;
  for (const auto& t : ops) out.push_back(t.dim() == 0 ? t : t.cuda());
  return out;
}
T toCpu(const T& ops) {
  T out;
  for (const auto& t : ops) out.push_back(t.cpu());
  return out;
}

// tsfuse on CUDA == eager CUDA (exact, or allclose for float reductions / transcendentals), and
// == tsfuse on the CPU (values only, within tolerance: CPU and CUDA eager round some ops apart; a
// float16/bfloat16 host scalar, for one, is read in float on CUDA and rounded to the dtype on the
// CPU, so a half result may differ by a few units in its last place).
::testing::AssertionResult checkBoth(const std::string& expr, const T& cpuOps, const EagerFn& eager,
                                     const ReduceArgs* red, bool exact) {
  OptIn on;
  T ops = toCuda(cpuOps);
  CheckOpts o;
  o.exact = exact;
  o.path = "native";
  auto r = red ? checkReduce(expr, ops, eager, *red, o) : checkPairwise(expr, ops, eager, o);
  if (!r) return r;
  at::Tensor gpu =
      red ? tsfuse::reduce(ops, expr, red->reduction, red->dim, red->keepdim, red->dtype) : tsfuse::pairwise(ops, expr);
  at::Tensor cpu = red ? tsfuse::reduce(cpuOps, expr, red->reduction, red->dim, red->keepdim, red->dtype)
                       : tsfuse::pairwise(cpuOps, expr);
  const at::ScalarType dt = gpu.scalar_type();
  const double rtol = dt == at::kHalf ? 0x1p-8 : dt == at::kBFloat16 ? 0x1p-5 : 1e-5;
  return sameTensor(cpu, gpu.cpu(), false, rtol, 1e-6);
}

const char* kIoU =
    "v1: minimum($0, $1); maximum($2, $3); sub(%0, %1); clamp(%2, 0, None); minimum($4, $5); "
    "maximum($6, $7); sub(%4, %5); clamp(%6, 0, None); mul(%3, %7)";

at::Tensor iouEager(const T& x) {
  at::Tensor h = at::clamp_min(at::sub(at::minimum(x[0], x[1]), at::maximum(x[2], x[3])), 0);
  at::Tensor w = at::clamp_min(at::sub(at::minimum(x[4], x[5]), at::maximum(x[6], x[7])), 0);
  return at::mul(h, w);
}

T iouOperands(Gen& g, int64_t N, int64_t M, at::ScalarType dt) {
  at::Tensor b1 = g.tensor({N, 4}, dt), b2 = g.tensor({M, 4}, dt);
  auto col = [&](const at::Tensor& b, int k) { return b.narrow(1, k, 1); };      // [N, 1], stride 4
  auto row = [&](const at::Tensor& b, int k) { return b.narrow(1, k, 1).t(); };  // [1, M]
  return {col(b1, 3), row(b2, 3), col(b1, 1), row(b2, 1), col(b1, 2), row(b2, 2), col(b1, 0), row(b2, 0)};
}

TEST(CudaKernels, PairwiseIoUAllFloatDtypes) {
  REQUIRE_GPU();
  Gen g(1);
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16})
    for (auto [N, M] : {std::pair<int64_t, int64_t>{1, 1}, {37, 29}, {1000, 500}, {17, 1}})
      EXPECT_TRUE(checkBoth(kIoU, iouOperands(g, N, M, dt), iouEager, nullptr, true)) << dt;
}

TEST(CudaKernels, PairwiseDtypesLayoutsAndHostScalars) {
  REQUIRE_GPU();
  Gen g(2);
  const std::string e = "v1: sub($0, $1); abs(%0); lt(%1, 1); where(%2, $0, $1)";
  auto eager = [](const T& x) { return at::where(at::lt(at::abs(at::sub(x[0], x[1])), 1), x[0], x[1]); };
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kInt, at::kLong, at::kByte, at::kHalf, at::kBFloat16})
    for (int l = 0; l < 4; ++l) {
      T ops = {g.layout(g.tensor({33, 1, 5}, dt), l), g.layout(g.tensor({7, 5}, dt), l + 1)};
      EXPECT_TRUE(checkBoth(e, ops, eager, nullptr, true)) << dt << " layout " << l;
    }
  // A 0-dim CPU operand is a host scalar; literals in float16 stay in float (opmath).
  at::Tensor x = g.tensor({64, 1}, at::kHalf), y = g.tensor({1, 48}, at::kHalf);
  at::Tensor s = at::scalar_tensor(0.1, at::kDouble);
  EXPECT_TRUE(checkBoth(
      "v1: add($0, $2); mul(%0, $1); div(%1, 3.0)", {x, y, s},
      [](const T& v) { return at::div(at::mul(at::add(v[0], v[2]), v[1]), 3.0); }, nullptr, true));
}

// minimum/maximum on every pair of +-0.0, NaNs with payloads, +-inf and ordinary values, in every
// float dtype: bit for bit eager CUDA's (the NaN operand itself, else the device's min/max).
TEST(CudaKernels, MinMaxSignedZerosAndNaNs) {
  REQUIRE_GPU();
  const float nanPayload = c10::bit_cast<float>(uint32_t{0x7fc00123}),
              negNan = c10::bit_cast<float>(uint32_t{0xffc00000});
  const std::vector<float> v = {-0.0f, 0.0f, nanPayload, negNan, 1.0f, -1.0f, INFINITY, -INFINITY, 0.5f};
  at::Tensor base = at::tensor(v);
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    at::Tensor col = base.to(dt).view({-1, 1}), row = base.to(dt).view({1, -1});
    EXPECT_TRUE(checkBoth(
        "v1: minimum($0, $1)", {col, row}, [](const T& x) { return at::minimum(x[0], x[1]); }, nullptr, true))
        << dt;
    EXPECT_TRUE(checkBoth(
        "v1: maximum($0, $1)", {col, row}, [](const T& x) { return at::maximum(x[0], x[1]); }, nullptr, true))
        << dt;
    // clamp by tensor bounds, by scalar bounds (every value as the bound), relu: the fuzzer found
    // relu(-0.0) on CUDA (seed 41, program 697), where eager's device max gives +0.0.
    at::Tensor hi = base.to(dt).view({1, 1, -1});
    EXPECT_TRUE(checkBoth(
        "v1: clamp($0, $1, $2)", {col.unsqueeze(2), row.unsqueeze(2), hi},
        [](const T& x) { return at::clamp(x[0], x[1], x[2]); }, nullptr, true))
        << dt;
    EXPECT_TRUE(checkBoth(
        "v1: relu($0)", {col}, [](const T& x) { return at::relu(x[0]); }, nullptr, true))
        << dt;
    for (float b : v) {
      if (std::isnan(b)) continue;  // a NaN scalar bound is not the kernels' case (ATen fills NaN)
      const std::string lit = c10::str(std::signbit(b) && b == 0 ? "-0.0" : c10::str(b));
      const c10::Scalar sb(static_cast<double>(b));
      EXPECT_TRUE(checkBoth(
          "v1: clamp($0, " + lit + ", None)", {col}, [sb](const T& x) { return at::clamp_min(x[0], sb); }, nullptr,
          true))
          << dt << " " << lit;
      EXPECT_TRUE(checkBoth(
          "v1: clamp($0, None, " + lit + ")", {col}, [sb](const T& x) { return at::clamp_max(x[0], sb); }, nullptr,
          true))
          << dt << " " << lit;
      EXPECT_TRUE(checkBoth(
          "v1: clamp($0, " + lit + ", 0.0)", {col}, [sb](const T& x) { return at::clamp(x[0], sb, 0.0); }, nullptr,
          true))
          << dt << " " << lit;
    }
  }
}

// The transcendentals with a device primitive, bit for bit eager CUDA's in every float dtype:
// both call libdevice on the dtype (a half through float). Values: signed zeros, infinities,
// NaN, subnormals, the large arguments where sin/cos reduce their argument the slow way, and
// float32 bit patterns spread over every exponent; alone and after a broadcast subtraction.
TEST(CudaKernels, TranscendentalsBitForBit) {
  REQUIRE_GPU();
  at::Tensor special = at::tensor({0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -1e-45f, 1e-30f, 0.5f, -1.0f,
                                   3.14159265f, 1e5f, -1e20f, 3e38f, 88.7f, -104.0f, 9.5f, -20.0f});
  at::Tensor patterns =
      at::randint(INT32_MIN, INT32_MAX, {1 << 16}, at::TensorOptions().dtype(at::kInt)).view(at::kFloat);
  patterns = at::where(at::isnan(patterns), at::zeros_like(patterns), patterns);
  at::Tensor values = at::cat({special, patterns, at::randn({1 << 16}) * 4});
  const std::pair<const char*, at::Tensor (*)(const at::Tensor&)> ops[] = {{"sin", [](const at::Tensor& x) { return at::sin(x); }},
                                                                           {"cos", [](const at::Tensor& x) { return at::cos(x); }},
                                                                           {"atan", [](const at::Tensor& x) { return at::atan(x); }},
                                                                           {"tanh", [](const at::Tensor& x) { return at::tanh(x); }},
                                                                           {"exp", [](const at::Tensor& x) { return at::exp(x); }},
                                                                           {"log", [](const at::Tensor& x) { return at::log(x); }}};
  Gen g(7);
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16})
    for (const auto& [name, fn] : ops) {
      EXPECT_TRUE(checkBoth(
          std::string("v1: ") + name + "($0)", {values.to(dt)}, [fn = fn](const T& x) { return fn(x[0]); }, nullptr,
          true))
          << name << " " << dt;
      T pair = {g.tensor({300, 1}, dt), g.tensor({1, 200}, dt)};
      EXPECT_TRUE(checkBoth(
          std::string("v1: sub($0, $1); ") + name + "(%0)", pair,
          [fn = fn](const T& x) { return fn(at::sub(x[0], x[1])); }, nullptr, true))
          << name << " " << dt;
    }
}

TEST(CudaKernels, SimilarityGemmTiledReduce) {
  REQUIRE_GPU();
  Gen g(3);
  const std::string e = "v1: sub($0, $1); abs(%0); lt(%1, 1)";
  auto eager = [](const T& v) { return at::lt(at::abs(at::sub(v[0], v[1])), 1); };
  for (auto [S, D] : {std::pair<int64_t, int64_t>{256, 2000}, {3, 65}, {17, 1}, {1, 130}}) {
    at::Tensor x = g.tensor({S, D}, at::kFloat), y = g.tensor({S, D}, at::kFloat);
    ReduceArgs sum{"sum", std::vector<int64_t>{0}, false, std::nullopt};
    EXPECT_TRUE(checkBoth(e, {x.unsqueeze(2), y.unsqueeze(1)}, eager, &sum, true)) << S << "x" << D;
    ReduceArgs any{"any", std::vector<int64_t>{0}, true, std::nullopt};
    EXPECT_TRUE(checkBoth(e, {x.unsqueeze(2), y.unsqueeze(1)}, eager, &any, true));
  }
}

TEST(CudaKernels, ReductionsAlongOnePairwiseDim) {
  REQUIRE_GPU();
  Gen g(4);
  const std::string e = "v1: sub($0, $1); abs(%0)";
  auto eager = [](const T& v) { return at::abs(at::sub(v[0], v[1])); };
  at::Tensor a = g.tensor({300, 1}, at::kFloat, kNaN), b = g.tensor({1, 4000}, at::kFloat);
  for (const char* r : {"argmin", "argmax", "amax", "amin", "sum", "mean"})
    for (int64_t d : {0, 1}) {
      ReduceArgs ra{r, std::vector<int64_t>{d}, false, std::nullopt};
      const bool exact = std::string(r) != "sum" && std::string(r) != "mean";
      EXPECT_TRUE(checkBoth(e, {a, b}, eager, &ra, exact)) << r << " dim " << d;
    }
}

// tsfuse::reduce_with_indices on CUDA tensors: the generated kernel (path "native"), values and
// indices equal to eager CUDA's max/min (first index of the extremum, NaN wins) in float and int
// dtypes, and with an epilogue over both.
TEST(CudaKernels, MaxMinWithIndices) {
  REQUIRE_GPU();
  OptIn on;
  Gen g(8);
  const std::string e = "v1: sub($0, $1); abs(%0)";
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kInt, at::kHalf}) {
    at::Tensor a = g.tensor({300, 1}, dt, dt == at::kInt ? 0 : kNaN).cuda(), b = g.tensor({1, 900}, dt).cuda();
    for (const char* r : {"max", "min"})
      for (int64_t d : {0, 1})
        for (bool keepdim : {false, true}) {
          auto [v, i] = tsfuse::reduceWithIndices({a, b}, e, r, d, keepdim);
          EXPECT_STREQ(tsfuse::lastPath(), "native") << r << " " << dt;
          at::Tensor x = at::abs(at::sub(a, b));
          auto [ev, ei] = std::string(r) == "max" ? at::max(x, d, keepdim) : at::min(x, d, keepdim);
          EXPECT_TRUE(sameTensor(ev, v, true)) << r << " dim " << d << " " << dt;
          EXPECT_TRUE(at::equal(ei, i)) << r << " dim " << d << " " << dt;
        }
  }
  // Anchor matching's epilogue: where(values < t, -1, indices) takes the indices' place; the
  // max runs in the generated kernel, the epilogue as a fused elementwise call after it.
  at::Tensor a = g.tensor({200, 1}, at::kFloat).cuda(), b = g.tensor({1, 300}, at::kFloat).cuda();
  auto [v, m] = tsfuse::reduceWithIndices({a, b}, "v1: sub($0, $1); mul(%0, %0)", "max", 0, false,
                                          std::string("v1: eq($1, $1); masked_fill($1, %0, -1); lt($0, 0.4); "
                                                      "where(%2, %1, $1)"));
  EXPECT_STREQ(tsfuse::lastPath(), "native");
  auto [ev, ei] = at::max(at::mul(at::sub(a, b), at::sub(a, b)), 0);
  EXPECT_TRUE(sameTensor(ev, v, true));
  EXPECT_TRUE(at::equal(at::where(ev < 0.4, at::full_like(ei, -1), ei), m));
}

// The reductions with a state of several fields (and the GEMM-tiled skeleton for the [N, M]
// sums): logsumexp, norms, var/std, and the float16 map with the pair2 tiles.
TEST(CudaKernels, StateReductionsTiledSkeletonsAndHalf) {
  REQUIRE_GPU();
  Gen g(6);
  const std::string e = "v1: sub($0, $1); abs(%0)";
  auto eager = [](const T& v) { return at::abs(at::sub(v[0], v[1])); };
  at::Tensor a = g.tensor({300, 1}, at::kFloat), b = g.tensor({1, 700}, at::kFloat);
  for (const char* r : {"logsumexp", "norm:2.0", "norm:inf", "var:1.0", "std:0.0"})
    for (int64_t d : {0, 1}) {
      ReduceArgs ra{r, std::vector<int64_t>{d}, false, std::nullopt};
      EXPECT_TRUE(checkBoth(e, {a, b}, eager, &ra, std::string(r) == "norm:inf")) << r << " dim " << d;
    }
  at::Tensor x = g.tensor({64, 200}, at::kFloat), y = g.tensor({64, 150}, at::kFloat);
  ReduceArgs sum{"sum", std::vector<int64_t>{0}, false, std::nullopt};
  EXPECT_TRUE(checkBoth(e, {x.unsqueeze(2), y.unsqueeze(1)}, eager, &sum, false));  // gemm tiles
  for (at::ScalarType dt : {at::kHalf, at::kBFloat16})
    EXPECT_TRUE(checkBoth(kIoU, iouOperands(g, 333, 700, dt), iouEager, nullptr, true)) << dt;  // pair2 tiles
}

TEST(CudaKernels, GenericReduceAndEmpty) {
  REQUIRE_GPU();
  Gen g(5);
  const std::string e = "v1: mul($0, $1)";
  auto eager = [](const T& v) { return at::mul(v[0], v[1]); };
  T ops = {g.tensor({4, 1, 6, 3}, at::kInt), g.tensor({5, 6, 1}, at::kInt)};
  for (auto dims : {std::vector<int64_t>{0, 2}, std::vector<int64_t>{1}, std::vector<int64_t>{}}) {
    ReduceArgs ra{"sum", dims, false, std::nullopt};
    EXPECT_TRUE(checkBoth(e, ops, eager, &ra, true));
  }
  T empty = {g.tensor({0, 1}, at::kFloat), g.tensor({1, 7}, at::kFloat)};
  ReduceArgs s0{"sum", std::vector<int64_t>{0}, false, std::nullopt};
  OptIn on;
  EXPECT_TRUE(checkReduce(e, toCuda(empty), eager, s0, {}));
}

// N * M beyond 2^31 elements: 64-bit indexing in the pairwise kernels (bool output, ~2.1 GB).
TEST(CudaKernels, SixtyFourBitIndexing) {
  REQUIRE_GPU();
  OptIn on;
  const int64_t N = 65536, M = 32769;
  at::Tensor x = at::arange(N, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA)).unsqueeze(1);
  at::Tensor y = at::arange(M, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA)).unsqueeze(0);
  at::Tensor got = tsfuse::pairwise({x, y}, "v1: lt($0, $1)");
  EXPECT_STREQ(tsfuse::lastPath(), "native");
  EXPECT_TRUE(at::equal(got, at::lt(x, y)));
  // A 3-d broadcast (generic map kernel) past 2^31 elements: [2, N, M/2+1] int8 output.
  at::Tensor z = at::arange(2, x.options()).view({2, 1, 1});
  at::Tensor yh = y.narrow(1, 0, M / 2 + 1);
  at::Tensor got3 = tsfuse::pairwise({z, x, yh}, "v1: add($0, $1); lt(%0, $2); to(%1, int8)");
  EXPECT_TRUE(at::equal(got3, at::lt(at::add(z, x), yh).to(at::kChar)));
}

// The kernels are the default; TSFUSE_CUDA_KERNELS=0 sends CUDA calls to the exact chunked path.
TEST(CudaKernels, OnByDefaultOffWithZero) {
  REQUIRE_GPU();
  unsetenv("TSFUSE_CUDA_KERNELS");
  at::Tensor x = at::rand({8, 1}, at::kCUDA), y = at::rand({1, 8}, at::kCUDA);
  at::Tensor r = tsfuse::pairwise({x, y}, "v1: sub($0, $1)");
  EXPECT_STREQ(tsfuse::lastPath(), "native");
  EXPECT_TRUE(at::equal(r, at::sub(x, y)));
  setenv("TSFUSE_CUDA_KERNELS", "0", 1);
  r = tsfuse::pairwise({x, y}, "v1: sub($0, $1)");
  EXPECT_STREQ(tsfuse::lastPath(), "chunked");
  EXPECT_TRUE(at::equal(r, at::sub(x, y)));
  unsetenv("TSFUSE_CUDA_KERNELS");
}

// Every fused op kind has a CUDA kernel of its own in a CUDA build (none falls through to the
// chunked path's registration): checked on the dispatcher, so it runs without a GPU.
TEST(CudaKernels, EveryFusedOpKindIsRegisteredForCuda) {
  auto cudaKernel = [](const char* name) {
    return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").hasKernelForDispatchKey(c10::DispatchKey::CUDA);
  };
  if (!cudaKernel("tsfuse::pairwise")) GTEST_SKIP() << "built without CUDA";
  int kinds = 0;
#define TSFUSE_FUSED_OP(Kind, name, schema)         \
  EXPECT_TRUE(cudaKernel("tsfuse::" name)) << name; \
  ++kinds;
#include "kernels/runtime/fused_ops.def"
  EXPECT_GE(kinds, 7);
}

// Without a GPU the suite must skip, not fail: this test always runs and documents that.
TEST(CudaKernels, SkipsCleanlyWithoutGpu) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a CUDA device is present";
  at::Tensor x = at::rand({4, 1}), y = at::rand({1, 4});
  at::Tensor r = tsfuse::pairwise({x, y}, "v1: sub($0, $1)");
  EXPECT_TRUE(at::equal(r, at::sub(x, y)));
}

}  // namespace

}  // namespace cuda_cuda_kernels_test
