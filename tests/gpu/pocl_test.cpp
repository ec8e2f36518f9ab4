// The generated kernels (kernels/backends/cuda/codegen) run as OpenCL C on PoCL against eager CPU: the
// same texts NVRTC compiles for the GPU, generated with the CPU kernels' rules (Target::
// deviceWithCpuRules) so that eager CPU is the reference (the CUDA rules run in
// pocl_cuda_rules_test.cpp). Exact ops must match bit for bit; float sums/means/products accumulate in double (documented tolerance),
// transcendentals within a few ulp. Every case also runs on a capped grid (the grid-stride loops)
// and reductions on both skeletons. The small-shape test is what ctest runs under
// `oclgrind --data-races` (tests/gpu/oclgrind_check.sh).
#include "gpu_corpus.h"
#include "gradient_cases.h"
#include "opencl_driver.h"

#include <cstdio>
#include <functional>

namespace {

using namespace tsfuse_gpu;
using tsfuse::cuda::Kind;

ClDriver* driverOrFail() {
  std::string why;
  ClDriver* d = ClDriver::get(&why);
  if (!d) ADD_FAILURE() << why;
  return d;
}

// Whether eager CPU's float sqrt is IEEE's (correctly rounded), as the generated kernels' is on
// OpenCL and CUDA. It is not everywhere: ATen routes contiguous float sqrt through MKL's vector
// math, whose AMD code path returns sqrt(42) = 6.48074102 (IEEE: 6.48074055). There eager CPU
// is no bit-exact reference for sqrt, and the comparison takes the transcendentals' tolerance.
bool eagerSqrtIsIeee() {
  static const bool ieee = [] {
    at::Tensor x = at::arange(1, 4097, at::kFloat);
    return at::equal(at::sqrt(x), at::sqrt(x.to(at::kDouble)).to(at::kFloat));
  }();
  return ieee;
}

bool inexact(const GpuCase& c, const std::string& kernelText, const at::Tensor& want) {
  if (callsLibm(kernelText)) return true;
  if (!eagerSqrtIsIeee() && bodyCalls(kernelText, {"TSF_SQRT_"})) return true;
  if (!c.reduce || !at::isFloatingType(want.scalar_type())) return false;
  return c.reduce->roundsByOrder(want.scalar_type());  // wide accumulation: a documented tolerance
}

// A float -> integer cast of a value out of the integer's range (NaN and inf included) is
// undefined in C++ and differs between ATen's CPU and CUDA kernels: not compared.
bool castsNonFinite(const tsfuse::lower::Program& p, const GpuCase& c) {
  bool floatToInt = false;
  for (const auto& in : p.code)
    if (in.op == tsfuse::Prim::Cast && in.ct != at::kBool && !at::isFloatingType(in.ct) &&
        at::isFloatingType(p.slotType[in.a]))
      floatToInt = true;
  if (!floatToInt) return false;
  for (const at::Tensor& t : c.ops)
    if (at::isFloatingType(t.scalar_type()) && t.numel() &&
        (!t.isfinite().all().item<bool>() || t.abs().max().item<double>() > 100))
      return true;
  return false;
}

// Whether a value some instruction `from` computed reaches, through any chain of instructions, one
// that `to` names.
bool flowsInto(const tsfuse::lower::Program& p, bool (*from)(tsfuse::Prim), bool (*to)(tsfuse::Prim)) {
  std::vector<char> tainted(p.slotType.size());
  for (const auto& in : p.code) {
    bool reads = false;
    for (int s : {in.a, in.b, in.c}) reads = reads || (s >= 0 && tainted[s]);
    if (reads && to(in.op)) return true;
    tainted[in.out] = reads || from(in.op);
  }
  return false;
}

// sin/cos of a value computed from an exp: exp's 1-ulp difference between libm and MKL is, at the
// magnitudes exp reaches, many periods of sin (sin(exp(x)) for a byte x): not compared.
bool periodicOfAnExp(const tsfuse::lower::Program& p) {
  return flowsInto(
      p, [](tsfuse::Prim op) { return op == tsfuse::Prim::Exp; },
      [](tsfuse::Prim op) { return op == tsfuse::Prim::Sin || op == tsfuse::Prim::Cos; });
}

// Whether a min/max/clamp value reaches a division: which zero eager's CPU kernel returns on a
// -0.0/+0.0 tie (below) then becomes the sign of an infinity, and of what compares it.
bool zeroSignReachesADivision(const tsfuse::lower::Program& p) {
  return flowsInto(
      p,
      [](tsfuse::Prim op) {
        return op == tsfuse::Prim::Minimum || op == tsfuse::Prim::Maximum || op == tsfuse::Prim::ClampMin ||
               op == tsfuse::Prim::ClampMax || op == tsfuse::Prim::Clamp3;
      },
      [](tsfuse::Prim op) { return op == tsfuse::Prim::Div; });
}

// Which zero eager's CPU minimum/maximum return on a -0.0/+0.0 tie depends on its loop (the
// vector body returns the second operand, the scalar tail the first: tests/ops/jit_test.cpp), so
// with those primitives the sign of a zero result is not compared.
bool zeroSignFree(const tsfuse::lower::Program& p) {
  for (const auto& in : p.code)
    if (in.op == tsfuse::Prim::Minimum || in.op == tsfuse::Prim::Maximum) return true;
  return false;
}

at::Tensor unsignZeros(const at::Tensor& t) {
  return at::isFloatingType(t.scalar_type()) ? at::where(t == 0, at::zeros_like(t), t) : t;
}

struct Tally {
  int runs = 0, exact = 0, skipped = 0, declined = 0;
};

// Runs c's kernel(s) on PoCL; failures are added to the test.
void check(ClDriver& drv, const GpuCase& c, Tally& tally, bool allVariants) {
  Prepared p = prepare(c);
  std::optional<std::vector<at::Tensor>> want = eagerOf(c);
  if (!p.an || !want) {
    ++tally.skipped;  // eager raises: the fused op runs eager, which raises
    return;
  }
  std::vector<tsfuse::cuda::CallOptions> variants(1);
  variants[0].cudaRules = false;
  if (allVariants) {
    auto o = variants[0];
    o.index64 = true;
    variants.push_back(o);
    // Every skeleton that applies; a forced one that does not declines.
    const auto kinds = c.reduce ? std::vector<Kind>{Kind::ReduceThread, Kind::ReduceBlock, Kind::Gemm}
                                : std::vector<Kind>{Kind::Map, Kind::Pair2};
    for (Kind k : kinds) {
      auto r = variants[0];
      r.kind = k;
      variants.push_back(r);
    }
  }
  for (const auto& o : variants) {
    std::string why;
    auto k = tsfuse::cuda::kernelForCall(*p.e, c.ops, c.reduce ? &*c.reduce : nullptr, *p.an, *p.plan, o, &why);
    if (!k) {
      ++tally.declined;
      continue;
    }
    // (Random programs draw signed zeros on purpose; the workloads' ties are checked as they come.)
    if (castsNonFinite(k->program, c) || periodicOfAnExp(k->program) ||
        (c.label == "random" && zeroSignReachesADivision(k->program))) {
      ++tally.skipped;
      continue;
    }
    // Every output covered (the generic skeletons with 64-thread blocks), then a capped grid.
    const tsfuse::cuda::LaunchShape shape = tsfuse::cuda::launchShape(*k, int64_t(1) << 40);
    const bool generic = k->spec.kind == Kind::Map || k->spec.kind == Kind::ReduceThread;
    const int bs = generic ? 64 : shape.threads;
    const int64_t full = generic ? std::max<int64_t>(1, (k->numOut + bs - 1) / bs) : shape.blocks;
    // (One block for a tiled skeleton: it walks every tile, so reusing the staged operands is tested.)
    for (int64_t blocks : {full, std::min<int64_t>(full, generic ? 3 : 1)}) {
      std::vector<at::Tensor> outs{p.an->allocOut(at::kCPU).zero_()};
      if (c.reduce && c.reduce->withIndices()) outs.push_back(p.an->allocIndices(at::kCPU).zero_());
      std::string err = drv.run(*k, c.ops, outs, blocks, bs);
      ++tally.runs;
      const std::string where = c.label + " '" + c.expr + "'" + (c.reduce ? " " + tsfuse::describe(*c.reduce) : "") +
                                " on " + tsfuse_test::describeOperands(c.ops) + ", " + k->source.name + " x" +
                                std::to_string(blocks) + ": ";
      if (!err.empty()) {
        ADD_FAILURE() << where << err << "\n" << k->source.text;
        return;
      }
      const bool exact = !inexact(c, k->source.text, want->front());
      tally.exact += exact;
      for (size_t o = 0; o < outs.size(); ++o) {
        const at::Tensor& w = want->at(o);
        auto r = tsfuse_test::sameTensor(w, outs[o], exact || o == 1, 1e-5, 1e-6);  // indices: exact
        if (!r && exact && zeroSignFree(k->program))
          r = tsfuse_test::sameTensor(unsignZeros(w), unsignZeros(outs[o]), true);
        if (!r) {
          ADD_FAILURE() << where << (o ? "indices: " : "") << r.message() << "\n" << k->source.text;
          return;
        }
      }
    }
  }
}

TEST(GeneratedKernelsPocl, SeedWorkloadsExactVsEagerCpu) {
  ClDriver* d = driverOrFail();
  if (!d) return;
  Tally t;
  for (const GpuCase& c : seedCases(21)) check(*d, c, t, true);
  std::printf("[pocl] %s: seed: %d runs (%d exact), %d skipped, %d declined, %d builds\n", d->deviceName.c_str(),
              t.runs, t.exact, t.skipped, t.declined, d->builds);
  EXPECT_GT(t.runs, 150);
}

TEST(GeneratedKernelsPocl, BenchWorkloadsVsEagerCpu) {
  ClDriver* d = driverOrFail();
  if (!d) return;
  Tally t;
  for (const GpuCase& c : benchCases(25)) check(*d, c, t, true);
  std::printf("[pocl] bench workloads: %d runs (%d exact), %d skipped, %d declined\n", t.runs, t.exact, t.skipped,
              t.declined);
  EXPECT_GT(t.runs, 30);
}

// A training step's backward calls for the bench's workloads (gradient_cases.h): each runs on PoCL as
// a forward call does, against its CPU value, which, shaped as its operand, is autograd's gradient.
TEST(GeneratedKernelsPocl, BackwardKernelsVsEagerGradients) {
  ClDriver* d = driverOrFail();
  if (!d) return;
  Tally t;
  const std::vector<GradientCase> cs = gradientCases(27);
  for (const GradientCase& c : cs) {
    const auto value = eagerOf(c.call);
    ASSERT_TRUE(value) << c.call.label << ": " << c.call.expr;
    const double atol = 1e-5 * std::max(1.0, c.want.abs().max().item<double>());
    EXPECT_TRUE(tsfuse_test::sameTensor(c.want, c.sum.shapedAs(value->front(), c.operand), false, 1e-5, atol))
        << c.call.label << ": " << c.call.expr;
    check(*d, c.call, t, true);
  }
  std::printf("[pocl] backward calls: %zu, %d runs (%d exact), %d skipped, %d declined\n", cs.size(), t.runs, t.exact,
              t.skipped, t.declined);
  EXPECT_GT(cs.size(), 20u);
  EXPECT_GT(t.runs, 100);
}

TEST(GeneratedKernelsPocl, RegistryOpsExactVsEagerCpu) {
  ClDriver* d = driverOrFail();
  if (!d) return;
  Tally t;
  for (const GpuCase& c : registryCases(22)) check(*d, c, t, false);
  std::printf("[pocl] registry ops: %d runs (%d exact), %d skipped, %d declined\n", t.runs, t.exact, t.skipped,
              t.declined);
  EXPECT_GT(t.runs, 100);
}

TEST(GeneratedKernelsPocl, RandomRegistryProgramsVsEagerCpu) {
  ClDriver* d = driverOrFail();
  if (!d) return;
  Tally t;
  for (const GpuCase& c : randomCases(23, 220)) check(*d, c, t, false);
  std::printf("[pocl] random programs: %d runs (%d exact), %d skipped, %d declined\n", t.runs, t.exact, t.skipped,
              t.declined);
  EXPECT_GT(t.runs, 100);
}

// A program's literals are kernel parameters (Param::Literal), so the text, and the kernel NVRTC
// compiles from it, are the same for every value: a number the model computes at run time,
// bound into the program per call (kernels/runtime/bind_numbers.h), costs no compile on the device. Each
// value of each literal dtype (float32/64, float16 held in float, int32/64, bool), in a program
// and in a reduction's epilogue, runs against eager CPU.
TEST(GeneratedKernelsPocl, LiteralsArePassedWithEachCall) {
  ClDriver* d = driverOrFail();
  if (!d) return;
  Gen g(26);
  struct Form {
    std::string label;
    std::function<std::string(const std::string&)> expr;  // of one literal's text
    T ops;
    std::optional<tsfuse::ReduceSpec> reduce;
  };
  auto floats = [](const std::string& v) {
    return "v1: sub($0, $1); clamp(%0, " + v + ", None); mul(%1, " + v + "); gt(%2, " + v + "); where(%3, %2, " + v +
           ")";
  };
  auto ints = [](const std::string& v) {
    return "v1: sub($0, $1); mul(%0, " + v + "); lt(%1, " + v + "); logical_xor(%2, " + (v == "0" ? "False" : "True") +
           ")";
  };
  std::vector<Form> forms;
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kHalf})  // float16: under the CUDA rules only
    forms.push_back({std::string("float ") + c10::toString(dt),
                     floats,
                     {g.tensor({9, 1}, dt, tsfuse_test::kNaNInf), g.tensor({1, 40}, dt, tsfuse_test::kSignedZero)},
                     {}});
  for (at::ScalarType dt : {at::kInt, at::kLong})
    forms.push_back({std::string("int ") + c10::toString(dt), ints, {g.tensor({9, 1}, dt), g.tensor({1, 40}, dt)}, {}});
  tsfuse::ReduceSpec s = red(tsfuse::Reduction::Sum, std::vector<int64_t>{1});
  forms.push_back({"epilogue",
                   [](const std::string&) { return std::string("v1: sub($0, $1); abs(%0)"); },
                   {g.tensor({9, 1}, at::kFloat), g.tensor({1, 40}, at::kFloat)},
                   s});
  const std::vector<std::string> floatValues = {"0.5", "-0.0", "1000.25", "-3", "inf"},
                                 intValues = {"3", "-7", "0", "100000"};
  Tally t;
  for (const Form& f : forms) {
    const bool integral = f.label.rfind("int", 0) == 0;
    std::optional<std::string> text;
    for (const std::string& v : integral ? intValues : floatValues) {
      GpuCase c{f.label + " " + v, f.expr(v), f.ops, f.reduce};
      if (c.reduce)
        c.reduce->epilogue =
            std::make_shared<tsfuse::Expr>(tsfuse::Expr::parse("v1: mul($0, " + v + "); clamp(%0, None, " + v + ")"));
      Prepared p = prepare(c);
      ASSERT_TRUE(p.an && p.plan) << c.label;
      const bool half = c.ops[0].scalar_type() == at::kHalf;
      tsfuse::cuda::CallOptions o;
      o.cudaRules = half;  // (the CPU rules have no float16 form; pocl_cuda_rules_test runs it)
      std::string why;
      auto k = tsfuse::cuda::kernelForCall(*p.e, c.ops, c.reduce ? &*c.reduce : nullptr, *p.an, *p.plan, o, &why);
      ASSERT_TRUE(k) << c.label << ": " << why;
      if (!text) text = k->source.text;
      EXPECT_EQ(k->source.text, *text) << c.label << ": the text depends on the literal's value";
      if (!half) check(*d, c, t, false);
    }
  }
  EXPECT_GE(t.runs, 2 * (2 * 5 + 2 * 4 + 5));
}

// Small shapes of every skeleton (tails, a capped grid, a block reduction with fewer elements
// than threads, tiles with tails): what oclgrind --data-races checks in ctest.
TEST(GeneratedKernelsPocl, SmallShapes) {
  ClDriver* d = driverOrFail();
  if (!d) return;
  Gen g(24);
  using tsfuse::Reduction;
  std::vector<GpuCase> cs;
  cs.push_back({"iou", kIoU, iouOperands(g, 5, 7, at::kFloat), {}});
  cs.push_back({"iou pair2", kIoU, iouOperands(g, 19, 40, at::kFloat), {}});          // tiles with tails in N and M
  at::Tensor x = g.tensor({20, 18}, at::kFloat), y = g.tensor({20, 35}, at::kFloat);  // a K step with a tail
  for (Reduction r : {Reduction::Sum, Reduction::Argmin})
    cs.push_back(
        {"gemm", "v1: sub($0, $1); abs(%0)", {x.unsqueeze(2), y.unsqueeze(1)}, red(r, std::vector<int64_t>{0})});
  const std::string dist = "v1: sub($0, $1); abs(%0)";
  at::Tensor a = g.tensor({9, 1}, at::kFloat, tsfuse_test::kNaN), b = g.tensor({1, 300}, at::kFloat);
  for (Reduction r :
       {Reduction::Argmin, Reduction::Sum, Reduction::Amax, Reduction::All, Reduction::Max, Reduction::Min})
    for (int64_t dim : {0, 1}) cs.push_back({"nearest", dist, {a, b}, red(r, std::vector<int64_t>{dim})});
  Tally t;
  for (const GpuCase& c : cs) check(*d, c, t, true);
  std::printf("[opencl] %s: small shapes: %d runs\n", d->deviceName.c_str(), t.runs);
  EXPECT_GT(t.runs, 40);
}

}  // namespace
