// The MKL routines the tile interpreter calls for exp, log, sqrt, atan, sin, cos and tanh, and
// SLEEF's pow (kernels/backends/cpu/vml.h), against eager: the same bits on every tile length,
// offset and layout, NaN and infinities included, and through a fused op whose exp or pow eager
// computes on a broadcast value.
#include "jit_support.h"

#include "kernels/backends/cpu/vml.h"
#include "tsfuse/ops.h"

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <dlfcn.h>

#include <limits>

namespace ops_vml_test {

namespace {

using tsfuse::Op;

at::Tensor values(at::ScalarType dt, int64_t n, uint64_t seed) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor special = at::tensor({0.0, -0.0, inf, -inf, std::numeric_limits<double>::quiet_NaN(), 1e-45, 88.72,
                                   -103.97, 709.78, 1e30, -1e30, 42.0},
                                  at::kDouble);
  return at::cat({at::randn({n}, g, at::kDouble) * 40, at::rand({n}, g, at::kDouble) * 1e4, special}).to(dt);
}

bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().const_data_ptr(), b.contiguous().const_data_ptr(), a.numel() * a.element_size()) ==
             0;
}

struct Case {
  Op op;
  at::Tensor (*eager)(const at::Tensor&);
};
const Case kCases[] = {{Op::Exp, [](const at::Tensor& x) { return at::exp(x); }},
                       {Op::Log, [](const at::Tensor& x) { return at::log(x); }},
                       {Op::Sqrt, [](const at::Tensor& x) { return at::sqrt(x); }},
                       {Op::Atan, [](const at::Tensor& x) { return at::atan(x); }},
                       {Op::Sin, [](const at::Tensor& x) { return at::sin(x); }},
                       {Op::Cos, [](const at::Tensor& x) { return at::cos(x); }},
                       {Op::Tanh, [](const at::Tensor& x) { return at::tanh(x); }}};

TEST(VmlRoutines, EagersBitsOnEveryTileLengthAndOffset) {
  for (const Case& c : kCases)
    for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
      SCOPED_TRACE(std::string(tsfuse::opName(c.op)) + " " + c10::toString(dt));
      tsfuse::cpu::VmlRoutine r = tsfuse::cpu::vmlRoutine(c.op, dt);
      if (!at::hasMKL()) {
        EXPECT_FALSE(r);  // no MKL, no routine: ATen on the tile
        continue;
      }
      ASSERT_TRUE(r) << "ATen calls MKL's VML for this op; the routine should have been found and verified";
      const at::Tensor x = values(dt, 1200, 7);
      for (int64_t n : {1, 7, 16, 17, 100, 512})
        for (int64_t offset : {0, 1, 3}) {
          at::Tensor in = x.slice(0, offset, offset + n), out = at::empty_like(in);
          r(n, in.const_data_ptr(), out.data_ptr());
          EXPECT_TRUE(sameBits(c.eager(in), out)) << n << " at " << offset;
        }
      at::Tensor inPlace = x.clone();
      r(inPlace.numel(), inPlace.const_data_ptr(), inPlace.data_ptr());
      EXPECT_TRUE(sameBits(c.eager(x), inPlace));
      // eager on a strided, broadcast layout: the same routine on its chunks
      at::Tensor wide = x.view({-1, 1}).expand({x.numel(), 3}).t();
      EXPECT_TRUE(sameBits(c.eager(wide)[2], c.eager(x)));
    }
  EXPECT_FALSE(tsfuse::cpu::vmlRoutine(Op::Exp, at::kHalf));
  EXPECT_FALSE(tsfuse::cpu::vmlRoutine(Op::Add, at::kFloat));
}

// acosh and asinh (ATen's kernel: the C library's function per value): a per-value routine,
// eager's bits on every length and offset; and through a fused op over an outer product, where no
// tile calls ATen (the rounding there is a primitive).
TEST(VmlRoutines, PerValueRoutinesAreEagers) {
  const Case cases[] = {{Op::Acosh, [](const at::Tensor& x) { return at::acosh(x); }},
                        {Op::Asinh, [](const at::Tensor& x) { return at::asinh(x); }}};
  for (const Case& c : cases)
    for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
      SCOPED_TRACE(std::string(tsfuse::opName(c.op)) + " " + c10::toString(dt));
      tsfuse::cpu::VmlRoutine r = tsfuse::cpu::vmlRoutine(c.op, dt);
      ASSERT_TRUE(r);
      const at::Tensor x = at::cat({values(dt, 1200, 5), values(dt, 300, 6) / 50 + 1.5});
      for (int64_t n : {1, 7, 17, 512})
        for (int64_t offset : {0, 3}) {
          at::Tensor in = x.slice(0, offset, offset + n), out = at::empty_like(in);
          r(n, in.const_data_ptr(), out.data_ptr());
          EXPECT_TRUE(sameBits(c.eager(in), out)) << n << " at " << offset;
        }
      at::Tensor all = at::empty_like(x);
      r(x.numel(), x.const_data_ptr(), all.data_ptr());
      EXPECT_TRUE(sameBits(c.eager(x), all));
    }
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow("tsfuse::pairwise", "");
  tsfuse_test::Gen g(12);
  at::Tensor x = g.tensor({64, 1}, at::kFloat, tsfuse_test::kNaNInf) * 7,
             y = g.tensor({1, 300}, at::kFloat, tsfuse_test::kNaNInf);
  torch::jit::Stack s{c10::IValue(std::vector<at::Tensor>{x, y}),
                      c10::IValue("v1: mul($0, $1); acosh(%0); asinh(%0); round(%2); add(%1, %3)"),
                      c10::IValue(std::vector<int64_t>{})};
  const auto before = tsfuse::pathCounts();
  op.callBoxed(&s);
  EXPECT_TRUE(sameBits(at::acosh(x * y) + at::round(at::asinh(x * y)), s.at(0).toTensor()));
  EXPECT_EQ(tsfuse::pathCounts().atenTileOps, before.atenTileOps);
}

// exp answers the arguments whose result is not a normal number without MKL's slow path for
// them: eager's bits for every float whose exp is subnormal, for 2^20 floats from the +0
// boundary down, for a sample of the rest down to -inf, for doubles around their boundary, in
// blocks that mix the three kinds (zero, subnormal, normal results) at every offset, in place and
// out of place.
TEST(VmlRoutines, ExpOfUnderflowingArgumentsIsEagers) {
  if (!at::hasMKL()) GTEST_SKIP() << "no MKL";
  // consecutive values of a dtype: `count` of them from `from` towards -inf
  auto run = [](double from, int64_t count, at::ScalarType dt) {
    at::Tensor first = at::full({1}, from, at::kDouble).to(dt), steps = at::arange(count, at::kLong);
    return dt == at::kFloat ? (first.view(at::kInt).to(at::kLong) + steps).to(at::kInt).view(at::kFloat)
                            : (first.view(at::kLong) + steps).view(at::kDouble);
  };
  for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
    SCOPED_TRACE(c10::toString(dt));
    tsfuse::cpu::VmlRoutine r = tsfuse::cpu::vmlRoutine(Op::Exp, dt);
    ASSERT_TRUE(r);
    const bool f = dt == at::kFloat;
    // the smallest arguments whose exp is not +0 and, in float, is normal (MKL's, correctly rounded)
    const double zero = f ? -103.97207641601562 : -745.1332191019411, normal = -87.33654022216797;
    const at::Tensor subnormal = f ? run(normal, 2180454, dt).slice(0, 1) : at::empty({0}, dt);
    ASSERT_TRUE(!f || subnormal[-1].item<double>() == zero);
    const at::Tensor below = run(zero, f ? (int64_t{1} << 20) : 4096, dt), dense = at::cat({subnormal, below});
    EXPECT_TRUE(!f || (at::exp(subnormal) > 0).all().item<bool>() &&
                          (at::exp(subnormal) < std::numeric_limits<float>::min()).all().item<bool>());
    EXPECT_EQ(at::exp(below.slice(0, 1)).count_nonzero().item<int64_t>(), 0) << "the +0 boundary is MKL's";
    EXPECT_NE(at::exp(below[0]).item<double>(), 0.0);
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(5);
    const double inf = std::numeric_limits<double>::infinity();
    at::Tensor rest = at::cat({-at::exp(at::rand({50000}, g, at::kDouble) * (dt == at::kFloat ? 88 : 709)),
                               at::rand({5000}, g, at::kDouble) * 40 - 130, at::tensor({-inf, 0.0, -0.0}, at::kDouble)})
                          .to(dt);
    at::Tensor x = at::cat({dense, rest});
    x = x.index_select(0, at::randperm(x.numel(), g, at::kLong));  // blocks mixing all three kinds
    const at::Tensor want = at::exp(x);
    for (int64_t offset : {0, 1, 5}) {
      at::Tensor in = x.slice(0, offset), out = at::empty_like(in);
      r(in.numel(), in.const_data_ptr(), out.data_ptr());
      EXPECT_TRUE(sameBits(want.slice(0, offset), out)) << "offset " << offset;
    }
    at::Tensor ordered = at::cat({dense, rest}), inPlace = ordered.clone();  // long runs of one kind
    r(inPlace.numel(), inPlace.const_data_ptr(), inPlace.data_ptr());
    EXPECT_TRUE(sameBits(at::exp(ordered), inPlace));
  }
}

// Each call runs MKL on the calling thread alone (MKL_Set_Num_Threads_Local(1), so that a tile
// inside a parallel region does not open a nested one) and then gives the thread back its own
// setting: MKL's later work on this thread (a matmul) keeps its threads.
TEST(VmlRoutines, CallsLeaveTheThreadsMklCountAsItWas) {
  if (!at::hasMKL()) GTEST_SKIP() << "no MKL";
  void* self = dlopen(nullptr, RTLD_LAZY);
  auto setLocal = reinterpret_cast<int (*)(int)>(dlsym(self, "MKL_Set_Num_Threads_Local"));
  auto maxThreads = reinterpret_cast<int (*)()>(dlsym(self, "MKL_Get_Max_Threads"));
  ASSERT_TRUE(setLocal && maxThreads) << "libtorch_cpu exports MKL's service functions";
  tsfuse::cpu::VmlRoutine r = tsfuse::cpu::vmlRoutine(Op::Exp, at::kFloat);
  ASSERT_TRUE(r);
  const at::Tensor x = values(at::kFloat, 600, 8);
  at::Tensor out = at::empty_like(x);
  for (int local : {0, 2, 3}) {
    const int before = setLocal(local);
    const int expected = maxThreads();
    r(x.numel(), x.const_data_ptr(), out.data_ptr());
    EXPECT_EQ(maxThreads(), expected) << "local count " << local;
    EXPECT_EQ(setLocal(before), local);
    EXPECT_TRUE(sameBits(at::exp(x), out));
  }
}

// exp(x - y) over an outer product, and a sum of it: eager's bits for the map (every element),
// in each tiling the interpreter picks.
TEST(VmlRoutines, FusedExpOfABroadcastValueIsEagers) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow("tsfuse::pairwise", "");
  tsfuse_test::Gen g(11);
  for (at::ScalarType dt : {at::kFloat, at::kDouble})
    for (auto [n, m, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{3, 5, 1}, {64, 300, 1}, {200, 7, 16}}) {
      at::Tensor x = g.tensor({n, 1, k}, dt, tsfuse_test::kNaNInf), y = g.tensor({1, m, k}, dt, tsfuse_test::kNaNInf);
      torch::jit::Stack s{c10::IValue(std::vector<at::Tensor>{x, y}), c10::IValue("v1: sub($0, $1); exp(%0); log(%1)"),
                          c10::IValue(std::vector<int64_t>{})};
      op.callBoxed(&s);
      EXPECT_TRUE(sameBits(at::log(at::exp(x - y)), s.at(0).toTensor())) << n << "x" << m << "x" << k << " " << dt;
    }
}

// pow(x, e) for a number e: SLEEF's pow where ATen calls it, and no routine for the exponents ATen
// computes otherwise (the lowering's products, ATen's sqrt / rsqrt / reciprocal / fill / copy).
TEST(VmlRoutines, PowIsEagersForEveryGeneralExponent) {
  const std::string isa = at::get_cpu_capability();
  for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
    for (double special : {0.0, 1.0, -0.5, -1.0, 2.0, 3.0, -2.0})
      EXPECT_FALSE(tsfuse::cpu::powRoutine(dt, special)) << special;
    const at::Tensor x = at::cat({values(dt, 600, 9), values(dt, 600, 10).abs()});
    for (double e : {1.5, -1.7, 0.25, 2.0000001, 10.0, -7.0, std::numeric_limits<double>::quiet_NaN(), 0.5}) {
      SCOPED_TRACE(std::string(c10::toString(dt)) + " exponent " + std::to_string(e));
      tsfuse::cpu::VmlRoutine r = tsfuse::cpu::powRoutine(dt, e);
      if (e == 0.5 ? !at::hasMKL() : isa != "AVX2" && isa != "AVX512") {
        EXPECT_FALSE(r);  // ATen's vector width here is not one the routine models: ATen on tiles
        continue;
      }
      ASSERT_TRUE(r) << "ATen calls SLEEF's pow (" << isa << "); the routine should have been found and verified";
      for (int64_t n : {1, 15, 16, 17, 31, 33, 100, 512})
        for (int64_t offset : {0, 1, 5}) {
          at::Tensor in = x.slice(0, offset, offset + n), out = at::empty_like(in);
          r(n, in.const_data_ptr(), out.data_ptr());
          EXPECT_TRUE(sameBits(at::pow(in, e), out)) << n << " at " << offset;
        }
    }
  }
  EXPECT_FALSE(tsfuse::cpu::powRoutine(at::kInt, 1.5));
}

// pow(x, e) for a one-value exponent tensor (ATen's tensor-tensor kernel: SLEEF's pow, its tail
// in the dtype), the exponent given at call time; then through a fused op whose exponent is
// computed from a parameter (gpytorch's RQ kernel: (1 + d / (2a)) ** -a), where it runs compiled.
TEST(VmlRoutines, PowByATensorExponentIsEagers) {
  const std::string isa = at::get_cpu_capability();
  tsfuse_test::Gen g(13);
  for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
    tsfuse::cpu::VmlRoutine r = tsfuse::cpu::powTensorRoutine(dt);
    if (isa != "AVX2" && isa != "AVX512") {
      EXPECT_FALSE(r);
      continue;
    }
    ASSERT_TRUE(r);
    const at::Tensor x = at::cat({values(dt, 600, 11), values(dt, 600, 12).abs()});
    for (double e : {1.5, -1.7, 2.0, 0.5, -1.0, 3.0, std::numeric_limits<double>::infinity()})
      for (int64_t n : {1, 15, 17, 33, 512}) {
        at::Tensor in = x.slice(0, 3, 3 + n), out = at::empty_like(in);
        r(n, in.const_data_ptr(), out.data_ptr(), e);
        EXPECT_TRUE(sameBits(at::pow(in, at::scalar_tensor(e, in.options())), out)) << dt << " " << e << " n=" << n;
      }
    at::Tensor d = g.tensor({32, 1}, dt).abs(), a = g.tensor({1}, dt).abs() + 0.5, c = g.tensor({1, 512}, dt).abs();
    const std::string text = "v1: add($0, $2); mul($1, 2); div(%0, %1); add(%2, 1); neg($1); pow(%3, %4)";
    const at::Tensor want = at::pow((d + c) / (a * 2) + 1, -a);
    const tsfuse::PathCounts before = tsfuse::pathCounts();
    at::Tensor got;
    {
      tsfuse_test::JitOn on(true);
      got = tsfuse::pairwise({d, a, c}, text);
    }
    EXPECT_TRUE(sameBits(want, got)) << dt;
    if (tsfuse_test::haveJit()) EXPECT_EQ(tsfuse::pathCounts().atenTileOps, before.atenTileOps) << "pow by routine";
  }
  EXPECT_FALSE(tsfuse::cpu::powTensorRoutine(at::kInt));
}

// x ** e over an outer product, tiles the length of eager's rows (vectors aligned alike): eager's
// bits for every element; exponents 3, -2 and -1 are compiled products and quotients, the others
// SLEEF (or, for 0.5, MKL's sqrt) per tile.
TEST(VmlRoutines, FusedPowOfABroadcastValueIsEagers) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow("tsfuse::pairwise", "");
  tsfuse_test::Gen g(12);
  for (at::ScalarType dt : {at::kFloat, at::kDouble})
    for (const char* e : {"3", "-2", "-1", "1.5", "-0.7", "0.5"})
      for (int64_t m : {512, 7}) {
        const bool product = std::string(e) == "3" || std::string(e) == "-2" || std::string(e) == "-1";
        if (!product && m % 32) continue;  // ATen's scalar tail moves with the layout (docs/exactness.md)
        at::Tensor x = g.tensor({64, 1}, dt, tsfuse_test::kNaNInf), y = g.tensor({1, m}, dt, tsfuse_test::kNaNInf);
        const std::string text = std::string("v1: sub($0, $1); pow(%0, ") + e + ")";
        auto run = [&] {
          torch::jit::Stack s{c10::IValue(std::vector<at::Tensor>{x, y}), c10::IValue(text),
                              c10::IValue(std::vector<int64_t>{})};
          op.callBoxed(&s);
          return s.at(0).toTensor();
        };
        const at::Tensor want = at::pow(x - y, std::stod(e));
        const tsfuse_test::BothRuns both =
            tsfuse_test::runBoth([&] { return tsfuse_test::sameTensor(want, run(), true); }, run, text);
        EXPECT_TRUE(both.result) << text << " " << dt << " m=" << m;
        if (product) EXPECT_EQ(both.ran, tsfuse_test::haveJit()) << text << ": a product compiles";
      }
}

}  // namespace

}  // namespace ops_vml_test
