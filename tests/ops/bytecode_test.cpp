// The bytecode evaluator (kernels/bytecode.h) instantiated on the HOST — the same __host__
// __device__ code the CUDA kernels run — against eager CPU over random dtypes, values, broadcast
// patterns and layouts. CI has no GPU, so these tests carry the logic CPU and CUDA share: the
// lowering (implicit casts, literals, host scalars, clamp/relu/where forms) and every op's scalar
// semantics. Flavour::Cpu must match eager CPU bit for bit (transcendentals: within 1-2 ulp, as
// glibc and ATen's SLEEF differ); Flavour::Cuda is checked for its documented CUDA rules with
// references written from ATen's CUDA kernel formulas, and elsewhere within rounding of eager.
#include "test_util.h"

#include "kernels/analysis.h"
#include "kernels/bytecode_compile.h"

namespace {

using namespace tsfuse_test;
using tsfuse::bc::Flavour;
using T = std::vector<at::Tensor>;

// Evaluates `prog` element by element over the broadcast shape on the host (contiguous result).
at::Tensor evalHost(const tsfuse::bc::Program& prog, const T& ops, at::IntArrayRef shape) {
  using namespace tsfuse::bc;
  const DT rt = prog.type[prog.result];
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(fromDT(rt)));
  const int64_t R = static_cast<int64_t>(shape.size()), n = out.numel();
  std::vector<std::vector<int64_t>> st(ops.size(), std::vector<int64_t>(R, 0));
  for (size_t i = 0; i < ops.size(); ++i)
    for (int64_t d = 0; d < ops[i].dim(); ++d) {
      const int64_t D = R - ops[i].dim() + d;
      st[i][D] = ops[i].size(d) == 1 ? 0 : ops[i].stride(d);
    }
  Reg r[kMaxRegs];
  char* dst = static_cast<char*>(out.data_ptr());
  for (int64_t lin = 0; lin < n; ++lin) {
    preload(prog, r);
    for (size_t i = 0; i < ops.size(); ++i) {
      if ((prog.constLeaves >> i) & 1u) continue;
      int64_t off = 0, rem = lin;
      for (int64_t d = R - 1; d >= 0; --d) {
        off += (rem % shape[d]) * st[i][d];
        rem /= shape[d];
      }
      r[i] = loadElem(static_cast<const char*>(ops[i].const_data_ptr()) + off * ops[i].element_size(), prog.type[i]);
    }
    run(prog, r);
    storeElem(dst + lin * out.element_size(), rt, r[prog.result]);
  }
  return out;
}

struct Outcome {
  bool compiled = false;
  std::string why;
  at::Tensor value;
};

Outcome evalExpr(const std::string& text, const T& ops, Flavour f) {
  Outcome o;
  tsfuse::Expr e = tsfuse::Expr::parse(text);
  auto an = tsfuse::analyze(e, ops, nullptr);
  if (!an) {
    o.why = "eager raises";
    return o;
  }
  auto prog = tsfuse::bc::compile(e, *an, ops, f, &o.why);
  if (!prog) return o;
  o.compiled = true;
  o.value = evalHost(*prog, ops, an->shape);
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
      {"v1: clamp($0, $1, None); mul(%0, 3)", [](const T& x) { return at::mul(at::clamp(x[0], opt(x[1]), std::nullopt), 3); }},
      {"v1: clamp($0, None, 0.5); mul(%0, $1)", [](const T& x) { return at::mul(at::clamp(x[0], std::nullopt, 0.5), x[1]); }},
      {"v1: gt($0, $1); where(%0, $0, $1)", [](const T& x) { return at::where(at::gt(x[0], x[1]), x[0], x[1]); }},
      {"v1: eq($0, $1); logical_not(%0); logical_or(%1, $0)",
       [](const T& x) { return at::logical_or(at::logical_not(at::eq(x[0], x[1])), x[0]); }},
      {"v1: div($0, $1)", [](const T& x) { return at::div(x[0], x[1]); }},
      {"v1: neg($0); relu(%0); add(%1, $1)", [](const T& x) { return at::add(at::relu(at::neg(x[0])), x[1]); }},
      {"v1: logical_xor($0, $1); logical_and(%0, $0)", [](const T& x) { return at::logical_and(at::logical_xor(x[0], x[1]), x[0]); }},
      {"v1: ge($0, $1); le($0, $1); logical_and(%0, %1); ne(%2, True)",
       [](const T& x) { return at::ne(at::logical_and(at::ge(x[0], x[1]), at::le(x[0], x[1])), true); }},
      {"v1: to($0, float64); div(%0, $1)", [](const T& x) { return at::div(x[0].to(at::kDouble), x[1]); }},
      {"v1: mul($0, 2.5); add(%0, 1); sub(%1, $1)", [](const T& x) { return at::sub(at::add(at::mul(x[0], 2.5), 1), x[1]); }},
      {"v1: sub(1, $0); mul(%0, $1)", [](const T& x) { return at::mul(at::rsub(x[0], 1), x[1]); }},
      {"v1: where($0, 3, $1)", [](const T& x) { return at::where(x[0], 3, x[1]); }},
      {"v1: mul($0, $1); to(%0, int16); add(%1, 200)", [](const T& x) { return at::add(at::mul(x[0], x[1]).to(at::kShort), 200); }},
      {"v1: sqrt($0); mul(%0, $1)", [](const T& x) { return at::mul(at::sqrt(x[0]), x[1]); }, true},
      {"v1: exp($0); add(%0, $1)", [](const T& x) { return at::add(at::exp(x[0]), x[1]); }, true},
      {"v1: log($0); sub(%0, $1)", [](const T& x) { return at::sub(at::log(x[0]), x[1]); }, true},
      {"v1: sigmoid($0); mul(%0, $1)", [](const T& x) { return at::mul(at::sigmoid(x[0]), x[1]); }, true},
  };
  return c;
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> shapes(Gen& g, int p) {
  const int64_t N = g.randint(1, 6), M = g.randint(1, 6), K = g.randint(1, 4);
  switch (p % 6) {
    case 0: return {{N, 1}, {1, M}};
    case 1: return {{N, 1, K}, {M, K}};
    case 2: return {{}, {N, M}};
    case 3: return {{N, 1, M}, {}};
    case 4: return {{N, M}, {M}};
    default: return {{7, 1}, {1, 9}};
  }
}

void runSweep(Flavour f, const std::vector<at::ScalarType>& dtypes, uint64_t seed, int specials) {
  Gen g(seed);
  FailureLog log;
  int compiled = 0;
  for (int round = 0; round < 3; ++round)
    for (const Case& c : cases())
      for (at::ScalarType dt : dtypes) {
        auto [s0, s1] = shapes(g, g.randint(0, 5));
        T ops = {g.layout(g.tensor(s0, dt, specials), g.randint(0, 3)), g.layout(g.tensor(s1, dt, specials), g.randint(0, 3))};
        if (c.expr.rfind("v1: where($0", 0) == 0) ops[0] = ops[0].to(at::kBool);
        Outcome want;
        std::string err = errorOf([&] { want.value = c.eager(ops); });
        Outcome got = evalExpr(c.expr, ops, f);
        if (!err.empty()) {
          log.add(got.compiled ? ::testing::AssertionFailure() << "eager raises \"" << err << "\" but bytecode compiled"
                               : ::testing::AssertionSuccess());
          continue;
        }
        if (!got.compiled) continue;  // declined (e.g. integer true division): another path runs
        ++compiled;
        const bool reduced = dt == at::kHalf || dt == at::kBFloat16;
        const bool cudaRounding = f == Flavour::Cuda && at::isFloatingType(want.value.scalar_type());
        const bool exact = !c.loose && !cudaRounding;
        const double rtol = reduced ? 1e-2 : (c.loose || cudaRounding) ? 1e-6 : 0;
        auto r = sameTensor(want.value.contiguous(), got.value, exact, rtol, 1e-300);
        log.add(r, c.expr + " dtype " + c10::toString(dt) + " on " + describeOperands(ops) + ": ");
      }
  EXPECT_TRUE(log.result());
  EXPECT_GT(compiled, static_cast<int>(dtypes.size() * cases().size() * 3 / 2));
}

TEST(Bytecode, CpuFlavourMatchesEagerBitForBit) {
  runSweep(Flavour::Cpu, {at::kFloat, at::kDouble, at::kInt, at::kLong, at::kByte, at::kBool}, 11, 0);
}

// NaN and infinities. Signed zeros are left out: on these small tensors eager CPU runs its scalar
// loop, whose min/max/clamp order -0.0/+0.0 unlike its vector loop (elementwise.h follows the
// vector loop); the CUDA rules for signed zeros are tested below.
TEST(Bytecode, CpuFlavourSpecialValues) {
  runSweep(Flavour::Cpu, {at::kFloat, at::kDouble}, 12, kNaNInf);
}

TEST(Bytecode, CudaFlavourMatchesEagerWithinRounding) {
  runSweep(Flavour::Cuda, {at::kFloat, at::kDouble, at::kInt, at::kByte, at::kBool, at::kHalf, at::kBFloat16}, 13, 0);
}

// The rules where ATen's CUDA kernels differ from its CPU ones, against references written from
// the CUDA kernel formulas (BinaryDivTrueKernel.cu, MaxMinElementwiseKernel.cu, TensorCompare.cu,
// the opmath scalar of add/mul) with ATen ops on the CPU.
TEST(Bytecode, CudaFlavourDivByHostScalarMultipliesByReciprocal) {
  Gen g(21);
  at::Tensor x = g.tensor({4096}, at::kFloat);
  Outcome got = evalExpr("v1: div($0, 3.0)", {x}, Flavour::Cuda);
  ASSERT_TRUE(got.compiled) << got.why;
  at::Tensor want = at::mul(x, at::scalar_tensor(1.0f / 3.0f, at::kFloat));
  EXPECT_TRUE(sameTensor(want, got.value, true));
  Outcome cpu = evalExpr("v1: div($0, 3.0)", {x}, Flavour::Cpu);
  EXPECT_TRUE(sameTensor(at::div(x, 3.0), cpu.value, true));
  // A 0-dim CPU operand is a host scalar on CUDA too.
  at::Tensor s = at::scalar_tensor(7.0, at::kDouble);
  Outcome hs = evalExpr("v1: div($0, $1)", {x, s}, Flavour::Cuda);
  ASSERT_TRUE(hs.compiled) << hs.why;
  EXPECT_TRUE(sameTensor(at::mul(x, at::scalar_tensor(1.0f / 7.0f, at::kFloat)), hs.value, true));
}

TEST(Bytecode, CudaFlavourMinMaxOrderSignedZeros) {
  at::Tensor a = at::tensor({0.0, -0.0, 1.0, NAN, 2.0}, at::kFloat);
  at::Tensor b = at::tensor({-0.0, 0.0, NAN, 1.0, 2.0}, at::kFloat);
  Outcome mn = evalExpr("v1: minimum($0, $1)", {a, b}, Flavour::Cuda);
  Outcome mx = evalExpr("v1: maximum($0, $1)", {a, b}, Flavour::Cuda);
  ASSERT_TRUE(mn.compiled && mx.compiled);
  EXPECT_TRUE(sameTensor(at::tensor({-0.0, -0.0, NAN, NAN, 2.0}, at::kFloat), mn.value, true));
  EXPECT_TRUE(sameTensor(at::tensor({0.0, 0.0, NAN, NAN, 2.0}, at::kFloat), mx.value, true));
  // neg keeps the sign of zero (-(+0.0) == -0.0) on both flavours.
  Outcome ng = evalExpr("v1: neg($0)", {a}, Flavour::Cuda);
  EXPECT_TRUE(sameTensor(at::neg(a), ng.value, true));
}

TEST(Bytecode, CudaFlavourHalfKeepsHostScalarsInFloat) {
  Gen g(22);
  for (at::ScalarType dt : {at::kHalf, at::kBFloat16}) {
    at::Tensor x = g.tensor({2048}, dt);
    auto viaFloat = [&](const at::Tensor& v) { return v.to(dt); };
    const at::Tensor xf = x.to(at::kFloat), c = at::scalar_tensor(0.1f, at::kFloat);
    Outcome add = evalExpr("v1: add($0, 0.1)", {x}, Flavour::Cuda);
    Outcome mul = evalExpr("v1: mul($0, 0.1)", {x}, Flavour::Cuda);
    Outcome cmin = evalExpr("v1: clamp($0, 0.1, None)", {x}, Flavour::Cuda);
    ASSERT_TRUE(add.compiled && mul.compiled && cmin.compiled);
    EXPECT_TRUE(sameTensor(viaFloat(at::add(xf, c)), add.value, true)) << dt;
    EXPECT_TRUE(sameTensor(viaFloat(at::mul(xf, c)), mul.value, true)) << dt;
    EXPECT_TRUE(sameTensor(viaFloat(at::where(xf < c, c, xf)), cmin.value, true)) << dt;
    // Two tensors: float math, one rounding to the dtype (what eager does on both devices).
    at::Tensor y = g.tensor({2048}, dt);
    Outcome sub = evalExpr("v1: sub($0, $1)", {x, y}, Flavour::Cuda);
    EXPECT_TRUE(sameTensor(at::sub(x, y), sub.value, true)) << dt;
  }
}

TEST(Bytecode, CudaFlavourClampWithTensorBounds) {
  at::Tensor x = at::tensor({-3.0, 0.5, NAN, 5.0, 1.0, -0.0}, at::kFloat);
  at::Tensor lo = at::tensor({-1.0, NAN, 0.0, 0.0, 2.0, 0.0}, at::kFloat);
  at::Tensor hi = at::tensor({1.0, 1.0, 1.0, NAN, 1.5, 1.0}, at::kFloat);
  Outcome got = evalExpr("v1: clamp($0, $1, $2)", {x, lo, hi}, Flavour::Cuda);
  ASSERT_TRUE(got.compiled) << got.why;
  at::Tensor r = at::where(x < lo, lo, x);
  r = at::where(hi < r, hi, r);
  r = at::where(hi.isnan(), hi, r);
  r = at::where(lo.isnan(), lo, r);
  r = at::where(x.isnan(), x, r);
  EXPECT_TRUE(sameTensor(r, got.value, true));
}

TEST(Bytecode, DeclinesOpsWithoutADevicePrimitive) {
  at::Tensor x = at::rand({3}), y = at::rand({3}) + 1;
  for (const char* e : {"v1: pow($0, $1)", "v1: div_floor($0, $1)", "v1: add_alpha($0, $1, 2)"}) {
    Outcome o = evalExpr(e, {x, y}, Flavour::Cuda);
    EXPECT_FALSE(o.compiled) << e;
    EXPECT_NE(o.why.find("no native form"), std::string::npos) << o.why;
  }
  Outcome h = evalExpr("v1: add($0, $1)", {x.to(at::kHalf), y.to(at::kHalf)}, Flavour::Cpu);
  EXPECT_FALSE(h.compiled);
}

}  // namespace
