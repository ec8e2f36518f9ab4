// Compiled maps (kernels/backends/cpu/jit/jit.h, CompiledMap) against eager and against the
// interpreter: the ops stored into float and bool outputs, every tiling of the map path, operands
// past the pointer registers, the kernel caches' bound, random programs bit for bit against eager,
// and the perf map that names generated code. The compiled kernels need AVX2 and BMI2 (skipped
// without).
#include "jit_support.h"

#include "kernels/reference/aten_eval.h"

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>

#include <unistd.h>

namespace ops_jit_map_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

const ReduceArgs kSum0{"sum", std::vector<int64_t>{0}};

}  // namespace

namespace {

// Maps (CompiledMap): the whole program per tile, the result stored into the output, float or
// bool (bytes packed from the compare masks). Bit for bit eager's and the interpreter's. NB: no
// signed zeros among the map operands: which zero eager's min/max returns on a -0/+0 tie depends
// on whether the element fell into its vectorized loop or its scalar tail (the known divergence
// of PairwiseSpecial.SignedZeroTiesInMinimumMaximum); tsfuse follows the vectorized loop.
::testing::AssertionResult checkMapBoth(const std::string& expr, const T& ops, const EagerFn& eager, bool compiled) {
  const std::string what = expr + " on " + describeOperands(ops);
  return expectBoth(
      runBoth([&] { return checkPairwise(expr, ops, eager); }, [&] { return tsfuse::pairwise(ops, expr); }, what),
      compiled, what);
}

TEST(JitMap, SeedIntersectionAndBoolResultsInEveryTiling) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(41);
  const char* inter =
      "v1: minimum($0, $1); maximum($2, $3); sub(%0, %1); clamp(%2, 0, None); minimum($0, $3); "
      "maximum($2, $1); sub(%4, %5); clamp(%6, 0, None); mul(%3, %7)";
  auto interEager = [](const T& o) {
    return at::clamp(at::minimum(o[0], o[1]) - at::maximum(o[2], o[3]), 0) *
           at::clamp(at::minimum(o[0], o[3]) - at::maximum(o[2], o[1]), 0);
  };
  const char* flags = "v1: sub($0, $1); abs(%0); lt(%1, 1); gt($0, $1); logical_and(%2, %3)";
  auto flagsEager = [](const T& o) { return at::logical_and((o[0] - o[1]).abs() < 1, o[0] > o[1]); };
  for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
    // Row tiles (rows >= 128 lanes: operands in place, packed or uniform) and linear tiles (short
    // rows, 0-dim operands), lane counts with and without a masked tail.
    for (int64_t m : {128, 131, 700, 1024, 5, 37}) {
      T ops = {g.tensor({9, 1}, dt, kNaNInf), g.tensor({1, m}, dt, kNaNInf), g.tensor({9, 1}, dt, kNaNInf),
               g.tensor({1, m}, dt, kNaNInf)};
      EXPECT_TRUE(checkMapBoth(inter, ops, interEager, true)) << dt << " m=" << m;
      T two = {g.tensor({9, 1}, dt, kNaNInf), g.tensor({1, m}, dt, kNaNInf)};
      EXPECT_TRUE(checkMapBoth(flags, two, flagsEager, true)) << dt << " m=" << m;
    }
    // Strided columns (packed once per call), a 0-dim operand, a full [N, M] operand.
    at::Tensor boxes = g.tensor({300, 4}, dt, kNaNInf);
    T cols = {g.tensor({6, 1}, dt), boxes.select(1, 2).unsqueeze(0), g.tensor({}, dt), g.tensor({6, 300}, dt, kNaNInf)};
    EXPECT_TRUE(checkMapBoth(inter, cols, interEager, true)) << dt;
  }
}

// More operands than pointer registers (an IoU reads four columns of each box set, twice): the
// ones past the registers are read through Args and advanced there, still compiled, eager's bits.
// ((($0 - $1) + ($2 - $3)) + ...), then negated or compared: few values live at once, so only
// the operand pointers run short.
// floor, ceil, trunc and round compile (roundps' modes): eager's bits on halves (round's ties go
// to even), values past 2^23 / 2^52, NaN, infinities and signed zeros, in maps and in a sum.
TEST(JitMap, RoundingsCompileToEagersBits) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(43);
  // (valgrind's rounding emulation loses some signs of zero: there, compiled against interpreted)
  auto mapBoth = [](const std::string& e, const T& ops, const EagerFn& fn) {
    if (!underMemcheck()) return checkMapBoth(e, ops, fn, true);
    const std::string what = e + " on " + describeOperands(ops);
    return expectBoth(runBoth(
                          nullptr, [&] { return tsfuse::pairwise(ops, e); }, what),
                      true, what);
  };
  const char* expr =
      "v1: mul($0, $1); floor(%0); ceil(%0); trunc(%0); round(%0); add(%1, %2); sub(%3, %4); mul(%5, %6)";
  auto eager = [](const T& o) {
    const at::Tensor p = o[0] * o[1];
    return (at::floor(p) + at::ceil(p)) * (at::trunc(p) - at::round(p));
  };
  for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
    // x * 0.5 for integer x: every half (2.5 -> 2, -3.5 -> -4); x * 2^k past the last fraction bit.
    at::Tensor halves = at::arange(-40, 40, at::TensorOptions().dtype(dt)).view({-1, 1});
    for (double scale : {0.5, 0.25, 1e-3, 3.0e7, 1.0e16}) {
      T ops = {halves, at::full({1, 131}, scale, at::TensorOptions().dtype(dt))};
      EXPECT_TRUE(mapBoth(expr, ops, eager)) << dt << " scale=" << scale;
    }
    T specials = {g.tensor({9, 1}, dt, kAllSpecials) * 3, g.tensor({1, 700}, dt, kAllSpecials) * 5};
    EXPECT_TRUE(mapBoth(expr, specials, eager)) << dt;
    const std::vector<std::pair<const char*, EagerFn>> ones = {
        {"v1: mul($0, $1); floor(%0)", [](const T& o) { return at::floor(o[0] * o[1]); }},
        {"v1: mul($0, $1); ceil(%0)", [](const T& o) { return at::ceil(o[0] * o[1]); }},
        {"v1: mul($0, $1); trunc(%0)", [](const T& o) { return at::trunc(o[0] * o[1]); }},
        {"v1: mul($0, $1); round(%0)", [](const T& o) { return at::round(o[0] * o[1]); }}};
    for (const auto& [one, fn] : ones) EXPECT_TRUE(mapBoth(one, specials, fn)) << dt << " " << one;
  }
  T rows = {g.tensor({37, 3, 1}, at::kFloat, kNaNInf) * 4, g.tensor({37, 1, 1100}, at::kFloat, kNaNInf) * 4};
  EXPECT_TRUE(checkBoth(
      "v1: mul($0, $1); round(%0)", rows, [](const T& o) { return at::round(o[0] * o[1]); }, kSum0, true,
      CheckOpts{false, 1e-5, 1e-6}));
}

TEST(JitMap, OperandsPastThePointerRegistersAreReadThroughArgs) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(45);
  for (at::ScalarType dt : {at::kFloat, at::kDouble})
    for (int64_t m : {700, 131, 37})
      for (int pairs : {6, 8, 12, 24})
        for (bool compare : {false, true}) {
          // Uniform [N, 1] operands and strided columns of a [M, 4] tensor, alternating.
          at::Tensor boxes = g.tensor({m, 4}, dt, kNaNInf);
          T ops;
          for (int i = 0; i < pairs; ++i) {
            ops.push_back(g.tensor({9, 1}, dt, kNaNInf));
            ops.push_back(boxes.select(1, i % 4).unsqueeze(0));
          }
          EXPECT_TRUE(checkMapBoth(
              sumOfDifferences(pairs, compare).c_str(), ops,
              [&](const T& o) { return sumOfDifferencesEager(o, compare); }, true))
              << dt << " m=" << m << " operands=" << 2 * pairs << (compare ? " bool" : "");
        }
}

TEST(JitSum, OperandsPastThePointerRegistersAreReadThroughArgs) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(46);
  for (int pairs : {6, 8, 12, 24}) {
    T ops;
    for (int i = 0; i < pairs; ++i) {
      ops.push_back(g.tensor({20, 3, 1}, at::kFloat));
      ops.push_back(g.tensor({20, 1, 40}, at::kFloat));
    }
    // Sums of up to 24 differences per row: absolute rounding of order 1e-5 after cancellation.
    EXPECT_TRUE(checkBoth(
        sumOfDifferences(pairs, false), ops, [&](const T& o) { return sumOfDifferencesEager(o, false); }, kSum0, true,
        CheckOpts{false, 1e-5, 1e-4}))
        << 2 * pairs << " operands";
  }
}

// Bool operands (masks: a triplet mask from the eye's complement and label compares, mask.float()
// * x, where(mask, x, y)) are loaded a byte a lane as compare lanes: bool-only maps too, in
// float32-wide lanes. Every tiling, uniform (0-dim) and full operands, float32 and float64 values.
TEST(JitMap, BoolOperandsAreLoadedAsCompareLanes) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(48);
  const char* triplet =
      "v1: bitwise_not($0); bitwise_not($1); bitwise_not($2); bitwise_and(%0, %1); bitwise_and(%3, %2); "
      "bitwise_not($3); bitwise_and(%5, $4); bitwise_and(%6, %4)";
  auto tripletEager = [](const T& o) { return ~o[3] & o[4] & ((~o[0] & ~o[1]) & ~o[2]); };
  for (int64_t m : {128, 131, 700, 5, 37}) {
    T masks = {g.tensor({9, 1, 1}, at::kBool), g.tensor({9, 1, m}, at::kBool), g.tensor({1, 1, m}, at::kBool),
               g.tensor({9, 1, m}, at::kBool), g.tensor({9, 4, 1}, at::kBool)};
    EXPECT_TRUE(checkMapBoth(triplet, masks, tripletEager, true)) << "m=" << m;
    T two = {g.tensor({5, 1}, at::kBool), g.tensor({1, m}, at::kBool)};
    EXPECT_TRUE(checkMapBoth(
        "v1: logical_xor($0, $1)", two, [](const T& o) { return at::logical_xor(o[0], o[1]); }, true))
        << "m=" << m;
    for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
      const char* name = dt == at::kFloat ? "float32" : "float64";
      T scaled = {g.tensor({9, m}, at::kBool), g.tensor({9, 1}, dt, kNaNInf), g.tensor({1, m}, dt, kNaNInf)};
      EXPECT_TRUE(checkMapBoth(
          std::string("v1: to($0, ") + name + "); sub($1, $2); mul(%0, %1); relu(%2)", scaled,
          [&](const T& o) { return at::relu(o[0].to(dt) * (o[1] - o[2])); }, true))
          << dt << " m=" << m;
      T chosen = {g.tensor({1, m}, at::kBool), g.tensor({9, 1}, dt, kNaNInf), g.tensor({9, m}, dt, kNaNInf),
                  g.tensor({}, at::kBool)};
      EXPECT_TRUE(checkMapBoth(
          "v1: where($0, $1, $2); logical_and($0, $3); where(%1, %0, 0.5)", chosen,
          [](const T& o) { return at::where(at::logical_and(o[0], o[3]), at::where(o[0], o[1], o[2]), 0.5); }, true))
          << dt << " m=" << m;
    }
  }
}

// `mask == 0` of a bool mask computes in int64 in eager (the number promotes it); its values are
// exact in the program's floating dtype, so the comparison compiles there, with eager's results.
// A number past what that dtype holds exactly (2^24, 2^53: exactIntegerBound) keeps eager's int64
// (interpreted), as do integer operands, which the kernels do not load.
TEST(JitMap, ComparisonsOfBoolsWithNumbersCompile) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(49);
  using Cmp = at::Tensor (*)(const at::Tensor&, const at::Scalar&);
  const std::vector<std::pair<const char*, Cmp>> cmps = {{"eq", at::eq}, {"ne", at::ne}, {"lt", at::lt},
                                                         {"le", at::le}, {"gt", at::gt}, {"ge", at::ge}};
  for (const auto& [name, cmp] : cmps)
    for (int64_t c : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{2}, int64_t{1} << 24, (int64_t{1} << 24) + 1,
                      int64_t{1} << 53, (int64_t{1} << 53) + 1})
      for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
        const std::string expr = std::string("v1: ") + name + "($0, " + std::to_string(c) + "); where(%0, $1, 0.5)";
        const T ops = {g.tensor({9, 131}, at::kBool), g.tensor({1, 131}, dt, kNaNInf)};
        auto eager = [cmp = cmp, c](const T& o) { return at::where(cmp(o[0], c), o[1], 0.5); };
        // (compiled where the program's floating dtype holds c exactly: 2^24 in float32, 2^53 in float64)
        EXPECT_TRUE(checkMapBoth(expr, ops, eager, c <= (int64_t{1} << (dt == at::kDouble ? 53 : 24))))
            << dt << " " << c;
      }
  const T bytes = {g.tensor({9, 131}, at::kByte)};
  EXPECT_TRUE(checkMapBoth(
      "v1: gt($0, 200)", bytes, [](const T& o) { return at::gt(o[0], 200); }, false));
}

TEST(JitMap, DeclinedProgramsAreInterpreted) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  Gen g(42);
  T ints = {g.tensor({5, 1}, at::kInt), g.tensor({1, 200}, at::kInt)};
  EXPECT_TRUE(checkMapBoth(
      "v1: sub($0, $1); abs(%0)", ints, [](const T& o) { return (o[0] - o[1]).abs(); }, false));
  // A float result stored into an int64 output? No: the result's dtype is the output's. A compare
  // of int32 operands mixes dtypes the kernels do not cover.
  T mixed = {g.tensor({5, 1}, at::kFloat), g.tensor({1, 200}, at::kInt)};
  EXPECT_TRUE(checkMapBoth(
      "v1: lt($0, $1)", mixed, [](const T& o) { return o[0] < o[1]; }, false));
}

// The kernel cache is bounded; full, it starts afresh. A process that has run more programs than
// it keeps (a fuzzer, a server loading many models) still compiles a new program once, not on
// every call.
TEST(JitMap, ProgramsPastTheKernelCachesBoundCompileOnce) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  JitOn on(true);
  Gen g(44);
  const T ops = {g.tensor({4, 1}, at::kFloat), g.tensor({1, 40}, at::kFloat)};
  const char* bin[] = {"add", "sub", "mul", "div", "minimum", "maximum"};
  for (int k = 0; k < 600; ++k) {  // 600 programs of four instructions, no two alike
    std::string e = "v1: ";
    for (int i = 0, code = k; i < 4; ++i, code /= 6)
      e += std::string(i ? "; " : "") + bin[code % 6] + "(" + (i ? "%" + std::to_string(i - 1) : "$0") + ", $1)";
    tsfuse::pairwise(ops, e);
  }
  const std::string next = "v1: sub($0, $1); abs(%0); neg(%1); add(%2, $0); mul(%3, $1)";
  tsfuse::pairwise(ops, next);
  const int64_t compiled = jit::kernelsCompiled(), tiles = jit::tilesRun();
  EXPECT_TRUE(checkPairwise(next, ops, [](const T& o) { return (-(o[0] - o[1]).abs() + o[0]) * o[1]; }));
  EXPECT_EQ(jit::kernelsCompiled(), compiled);
  EXPECT_GT(jit::tilesRun(), tiles);
}

TEST(JitMap, RandomProgramsMatchEagerBitForBit) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  ProgramGen pg(43);
  Gen g(44);
  FailureLog log;
  int compiled = 0;
  const int total = 300;
  for (int i = 0; i < total; ++i) {
    const bool f64 = pg.pick(3) == 0;
    const at::ScalarType dt = f64 ? at::kDouble : at::kFloat;
    const int numInputs = 1 + pg.pick(4);
    const std::string expr = pg.make(numInputs, f64, pg.pick(2) == 0);
    const int64_t n = 1 + pg.pick(6), m = pg.pick(2) ? 1 + pg.pick(60) : 128 + pg.pick(500);
    T ops;
    for (int k = 0; k < numInputs; ++k) {
      switch (pg.pick(4)) {
        case 0:
          ops.push_back(g.tensor({n, 1}, dt, kNaNInf));
          break;
        case 1:
          ops.push_back(g.tensor({1, m}, dt, kNaNInf));
          break;
        case 2:
          ops.push_back(g.tensor({n, m}, dt, kNaNInf));
          break;
        default:
          ops.push_back(g.tensor({}, dt, kNaNInf));
          break;
      }
    }
    ops[0] = g.tensor({n, m}, dt, kNaNInf);
    ops.resize(tsfuse::Expr::parse(expr).numInputs);
    auto eager = [&](const T& o) { return tsfuse::evalAten(tsfuse::Expr::parse(expr), o); };
    std::function<::testing::AssertionResult()> check;
    if (!underMemcheck()) check = [&] { return checkPairwise(expr, ops, eager); };
    const BothRuns both = runBoth(
        check, [&] { return tsfuse::pairwise(ops, expr); }, expr);
    log.add(both.result, expr + " ");
    compiled += both.ran;
  }
  EXPECT_TRUE(log.result());
  EXPECT_GT(compiled, total * 8 / 10) << compiled << " of " << total << " programs ran compiled";
}

}  // namespace

namespace {

// TSFUSE_JIT_PERF_MAP=1: each compiled kernel's address range and name go to /tmp/perf-<pid>.map
// (perf's format: hex start, hex size, name), so profiles name generated code.
TEST(JitMap, KernelsAreNamedForProfilersOnRequest) {
  if (!haveJit()) GTEST_SKIP() << "no AVX2/BMI2: the compiled kernels are off";
  const std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
  auto lines = [&] {
    std::vector<std::string> out;
    std::ifstream in(path);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  };
  const size_t before = lines().size();
  Gen g(47);
  T ops = {g.tensor({5, 1}, at::kFloat), g.tensor({1, 300}, at::kFloat)};
  // A literal no other test uses: a program not in the kernel cache yet.
  setenv("TSFUSE_JIT_PERF_MAP", "1", 1);
  EXPECT_TRUE(checkMapBoth(
      "v1: sub($0, $1); mul(%0, 7.25)", ops, [](const T& o) { return (o[0] - o[1]) * 7.25; }, true));
  unsetenv("TSFUSE_JIT_PERF_MAP");
  const std::vector<std::string> after = lines();
  // A map's block kernel per compile (no masked tail: CompiledMap::run pads its last lanes;
  // compiled again per call once the kernel cache is full, as it is after the random-program
  // tests: then the same again).
  ASSERT_GE(after.size(), before + 1);
  for (size_t i = before; i < after.size(); ++i) {
    std::istringstream line(after[i]);
    std::string start, size, name;
    line >> start >> size >> name;
    EXPECT_GT(std::stoull(start, nullptr, 16), 0u) << after[i];
    EXPECT_GT(std::stoull(size, nullptr, 16), 0u) << after[i];
    EXPECT_EQ(name.rfind("tsfuse_jit_map_2i_1x", 0), 0u) << after[i];
    EXPECT_NE(name.find("_block_"), std::string::npos) << after[i];
  }
  // Off by default: a new program adds nothing.
  EXPECT_TRUE(checkMapBoth(
      "v1: sub($0, $1); mul(%0, 9.75)", ops, [](const T& o) { return (o[0] - o[1]) * 9.75; }, true));
  EXPECT_EQ(lines().size(), after.size());
  if (before == 0) std::remove(path.c_str());
}

}  // namespace

}  // namespace ops_jit_map_test
