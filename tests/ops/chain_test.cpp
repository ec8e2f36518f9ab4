// tsfuse::reduce_chain (kernels/runtime/chain.h): a reduction of a fused reduction's value, slab by slab.
// Each chain is checked against the same computation unchained (tsfuse::reduce, then the later
// stages with ATen over the stored value): bit for bit, whatever the number of slabs, since a
// slab's stage 0 is the same fused kernel and later stages are ATen's over the same rows; and
// against eager ATen (exact for extrema, indices and integers; float sums within the reduction
// tolerance). Then empty and NaN inputs, eager's own errors, autograd, Meta and malformed stages.
#include "chain_util.h"

#include "kernels/backends/cpu/native.h"

namespace ops_chain_test {

namespace {

using tsfuse_test::chained;
using tsfuse_test::Gen;
using tsfuse_test::sameAll;
using tsfuse_test::sameTensor;

class Chain : public tsfuse_test::ManySlabs {};

const std::string kSq = "v1: sub($0, $1); mul(%0, %0)";

// The chain unchained: stage 0 as tsfuse::reduce (storing its value), later stages with ATen.
std::vector<at::Tensor> unchained(const std::vector<at::Tensor>& ops, const std::string& expr,
                                  const std::vector<std::string>& stages) {
  const tsfuse::Chain c = tsfuse::Chain::parse(expr, stages);
  const tsfuse::ReduceSpec& s0 = c.stages[0];
  std::optional<std::vector<int64_t>> dims = s0.dims;
  std::optional<std::string> epi;
  if (s0.epilogue) epi = s0.epilogue->str();
  std::vector<at::Tensor> ins(ops.begin(), ops.begin() + static_cast<int64_t>(c.firstOperand[1]));
  at::Tensor v = tsfuse::reduce(ins, expr, tsfuse::reductionText(s0), dims, s0.keepdim, s0.dtype, epi);
  std::vector<at::Tensor> out{v};
  for (size_t k = 1; k < c.stages.size(); ++k) {
    tsfuse::ReduceSpec plain = c.stages[k];
    plain.epilogue.reset();
    out = tsfuse::applyReductionAll(plain, c.squeezeFirst[k] ? out[0].squeeze() : out[0]);
    if (c.stages[k].epilogue) out[0] = tsfuse::applyEpilogue(c.stages[k], out[0], c.epilogueOperands(ops, k));
  }
  return out;
}

struct Case {
  const char* name;
  std::vector<std::string> stages;
  bool extraOperand;  // b [M] for an epilogue of stage 0 or 1
  bool exactVsEager;  // no float sum over a broadcast value (extrema, indices)
};

const std::vector<Case> kCases = {
    {"gaussian kernel sum",
     {"sum(dim=[2], keepdim=False) |> v1: mul($0, -2.0); exp(%0); mul(%1, $1)", "sum(dim=[1], keepdim=False)"},
     true,
     false},
    {"nearest neighbour", {"sum(dim=[2], keepdim=False)", "argmin(dim=[1], keepdim=False)"}, false, false},
    {"column minima with indices", {"sum(dim=[2], keepdim=False)", "min(dim=[0], keepdim=True)"}, false, false},
    {"max of |d| then a later epilogue",
     {"amax(dim=[2], keepdim=True)", "amin(dim=[1], keepdim=False) |> v1: mul($0, $1)"},
     true,
     true},
    {"three stages",
     {"amax(dim=[2], keepdim=False)", "amin(dim=[0], keepdim=True)", "sum(dim=[0], keepdim=False)"},
     false,
     true},
    {"norm inside a mean", {"norm:2.0(dim=[2], keepdim=False)", "mean(dim=[1], keepdim=False)"}, false, false},
};

TEST_F(Chain, ManySlabsGiveTheUnchainedBitsAndEagersValues) {
  Gen g(7);
  for (int i = 0; i < 48; ++i) {
    const Case& c = kCases[i % kCases.size()];
    const int64_t n = 1 + g.randint(0, 30), m = 1 + g.randint(0, 25), d = 1 + g.randint(0, 6);
    const at::ScalarType dt = i % 4 == 3 ? at::kDouble : at::kFloat;
    at::Tensor x = g.tensor({n, 1, d}, dt), y = g.tensor({m, d}, dt);
    if (i % 3 == 1) x = x.transpose(0, 2).contiguous().transpose(0, 2);  // another layout
    if (i % 5 == 2) y = g.tensor({d, m}, dt).t();                        // y strided along D
    std::vector<at::Tensor> ops{x, y};
    if (c.extraOperand) ops.push_back(g.tensor({c.stages[0].find("|>") != std::string::npos ? m : 1}, dt));
    const std::string what = std::string(c.name) + " #" + std::to_string(i);
    std::vector<at::Tensor> got = chained(ops, kSq, c.stages);
    ASSERT_TRUE(sameAll(unchained(ops, kSq, c.stages), got, /*exact=*/true)) << what;
    ASSERT_TRUE(sameAll(tsfuse::evalChain(tsfuse::Chain::parse(kSq, c.stages), ops), got, c.exactVsEager)) << what;
  }
}

// Slabs run in parallel, each stage single-threaded inside one; unchained, ATen's reductions over
// the whole [N, M] value run multi-threaded (above its grain size): the same bits.
TEST_F(Chain, ParallelSlabsOfALargeCallGiveTheUnchainedBits) {
  tsfuse::setChainSlabElements(4096);
  Gen g(17);
  for (const Case& c : kCases) {
    at::Tensor x = g.tensor({300, 1, 3}, at::kFloat), y = g.tensor({211, 3}, at::kFloat);
    std::vector<at::Tensor> ops{x, y};
    if (c.extraOperand) ops.push_back(g.tensor({c.stages[0].find("|>") != std::string::npos ? 211 : 1}, at::kFloat));
    EXPECT_TRUE(sameAll(unchained(ops, kSq, c.stages), chained(ops, kSq, c.stages), /*exact=*/true)) << c.name;
  }
}

// A chain sliced along its value's columns (a Gaussian kernel's column sums) cuts rows narrower
// than a tile: stage 0's epilogue then runs over each slab after the reduction, with ATen's ops,
// the same bits as the compiled kernel's epilogue (NaN and infinities included).
TEST_F(Chain, NarrowRowsRunStageZerosEpilogueOverTheSlabInItsBits) {
  Gen g(19);
  const std::vector<std::string> stages{"sum(dim=[2], keepdim=False) |> v1: mul($0, -2.0); exp(%0); mul(%1, $1)",
                                        "sum(dim=[0], keepdim=False)"};
  const tsfuse::Chain c = tsfuse::Chain::parse(kSq, stages);
  const tsfuse::NativePath native = tsfuse::cpu::runNative;
  for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
    const std::vector<at::Tensor> slab{g.tensor({300, 1, 3}, dt, tsfuse_test::kNaNInf), g.tensor({37, 3}, dt),
                                       g.tensor({37}, dt)};
    EXPECT_TRUE(sameTensor(tsfuse::stageZero(c, slab, false, native), tsfuse::stageZero(c, slab, true, native), true));
  }
  tsfuse::setChainSlabElements(4096);
  const int64_t before = tsfuse::slabEpiloguesAfterStageZero();
  const std::vector<at::Tensor> ops{g.tensor({300, 1, 3}, at::kFloat), g.tensor({211, 3}, at::kFloat),
                                    g.tensor({211}, at::kFloat)};
  EXPECT_TRUE(sameAll(tsfuse::evalChain(c, ops), chained(ops, kSq, stages), /*exact=*/false));
  EXPECT_GT(tsfuse::slabEpiloguesAfterStageZero(), before);  // sliced along the 211 columns
}

// A traced `.squeeze()` between the reductions: x [N, 1, 1, D] gives a [N, 1, M] inner value.
// Stage 0's epilogue broadcasting its reduced value to [N, M] (a row norm added to a matmul's
// output, PatchCore's nearest neighbour): the next stage reduces that epilogue fused, so no block
// of [N, M] values is allocated; the unchained bits (an extremum: in any order).
TEST_F(Chain, AGrowingStageZeroEpilogueIsReducedFused) {
  Gen g(46);
  const int64_t n = 300, m = 700;
  const at::Tensor x = g.tensor({n, 8}, at::kFloat), mm = g.tensor({n, m}, at::kFloat),
                   yn = g.tensor({1, m}, at::kFloat);
  for (const char* next : {"amin(dim=[1], keepdim=False)", "min(dim=[1], keepdim=False)"}) {
    const std::vector<std::string> stages{
        "sum(dim=[-1], keepdim=True) |> v1: mul($1, -2.0); add(%0, $0); add(%1, $2); clamp_min(%2, 0.0); sqrt(%3)",
        next};
    const std::vector<at::Tensor> ops{x, mm, yn};
    static tsfuse_test::CountingAllocator counting;
    counting.largest = 0;
    c10::Allocator* previous = c10::GetCPUAllocator();
    c10::SetCPUAllocator(&counting, /*priority=*/UINT8_MAX);
    const std::vector<at::Tensor> got = chained(ops, "v1: mul($0, $0)", stages);
    c10::SetCPUAllocator(previous, /*priority=*/UINT8_MAX);
    EXPECT_LT(counting.largest, static_cast<size_t>(n * m * 4)) << next;
    EXPECT_TRUE(sameAll(unchained(ops, "v1: mul($0, $0)", stages), got, /*exact=*/true)) << next;
  }
}

TEST_F(Chain, AStageThatSqueezesFirst) {
  Gen g(18);
  const std::vector<std::string> stages{"sum(dim=[3], keepdim=False)", "squeeze() |> argmin(dim=[-1], keepdim=False)"};
  EXPECT_EQ(tsfuse::Chain::parse(kSq, stages).stageTexts(), stages);
  for (int i = 0; i < 12; ++i) {
    const int64_t n = 1 + g.randint(0, 30), m = 1 + g.randint(0, 25);
    at::Tensor x = g.tensor({n, 1, 1, 3}, at::kFloat), y = g.tensor({m, 3}, at::kFloat);
    std::vector<at::Tensor> got = chained({x, y}, kSq, stages);
    ASSERT_TRUE(sameAll(unchained({x, y}, kSq, stages), got, true)) << n << "x" << m;
    at::Tensor want = at::argmin(at::sum(at::sub(x, y) * at::sub(x, y), {3}).squeeze(), -1);
    ASSERT_TRUE(sameTensor(want, got[0], true)) << n << "x" << m;
  }
}

// A later argmin/argmax over one dim runs as min/max(dim)'s indices, and a values-only max/min
// (amin:index) as tsfuse::extremum_values: eager's argmin indices and min(dim)'s values on ties,
// NaN and -0.0, for float and integer values, both dims, keepdim; bool values still raise
// argmin's own error.
TEST_F(Chain, LaterArgExtremaGiveArgminsIndices) {
  Gen g(23);
  for (int i = 0; i < 40; ++i) {
    const at::ScalarType dt = std::vector<at::ScalarType>{at::kFloat, at::kDouble, at::kInt, at::kLong}[i % 4];
    const int64_t n = 2 + g.randint(0, 30), m = 2 + g.randint(0, 25);
    at::Tensor x = g.tensor({n, 1, 2}, dt, at::isFloatingType(dt) ? tsfuse_test::kNaN | tsfuse_test::kSignedZero : 0);
    at::Tensor y = g.tensor({m, 2}, dt);
    if (at::isFloatingType(dt)) x = x.round(), y = y.round();  // ties
    const char* kinds[] = {"argmin", "argmax", "amin:index", "amax:index"};
    const std::string stage = std::string(kinds[(i / 4) % 4]) + "(dim=[" + std::to_string(i % 3 == 0 ? 0 : -1) +
                              "], keepdim=" + (i % 5 == 0 ? "True" : "False") + ")";
    const std::vector<std::string> stages{"amax(dim=[2], keepdim=False)", stage};
    ASSERT_TRUE(sameAll(unchained({x, y}, kSq, stages), chained({x, y}, kSq, stages), true)) << stage << " " << dt;
  }
  using tsfuse_test::errorOf;
  at::Tensor x = at::randn({40, 1, 3}), y = at::randn({30, 3});
  const std::vector<std::string> onBool{"sum(dim=[2], keepdim=False) |> v1: gt($0, 1.0)",
                                        "argmin(dim=[1], keepdim=False)"};
  const std::string want = errorOf([&] { at::argmin(at::randn({40, 30}) > 1.0, 1); });
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(errorOf([&] { tsfuse::reduceChain({x, y}, kSq, onBool); }), want);
}

// The same values-only stages over slabs large enough for the fused kernels (kernels/runtime/extrema.h).
TEST_F(Chain, LaterValuesOnlyExtremaOfLargeSlabsAreMinsValues) {
  Gen g(24);
  for (int i = 0; i < 8; ++i) {
    const at::ScalarType dt = i % 2 ? at::kDouble : at::kFloat;
    at::Tensor x = g.tensor({300, 1, 2}, dt, tsfuse_test::kNaN | tsfuse_test::kSignedZero).round();
    at::Tensor y = g.tensor({200, 2}, dt).round();
    const std::string stage = std::string(i % 4 < 2 ? "amin:index" : "amax:index") + "(dim=[" +
                              std::to_string(i % 3 == 0 ? 0 : 1) + "], keepdim=" + (i % 5 == 0 ? "True" : "False") +
                              ")";
    const std::vector<std::string> stages{"amax(dim=[2], keepdim=False)", stage};
    const auto want = unchained({x, y}, kSq, stages), got = chained({x, y}, kSq, stages);
    ASSERT_TRUE(sameAll(want, got, true)) << stage << " " << dt;
    EXPECT_TRUE(at::equal(at::signbit(want[0]), at::signbit(got[0]))) << stage;
  }
}

TEST_F(Chain, IntegerValuesAreExactAgainstEager) {
  Gen g(8);
  const std::vector<std::string> stages{"sum(dim=[2], keepdim=False)", "max(dim=[1], keepdim=False)"};
  at::Tensor x = g.tensor({37, 1, 3}, at::kInt), y = g.tensor({29, 3}, at::kInt);
  auto got = chained({x, y}, kSq, stages);
  EXPECT_TRUE(sameAll(tsfuse::evalChain(tsfuse::Chain::parse(kSq, stages), {x, y}), got, true));
  EXPECT_STREQ(tsfuse::lastPath(), "native");
}

TEST_F(Chain, NanAndInfFollowEagersRules) {
  Gen g(9);
  const std::vector<std::string> stages{"amax(dim=[2], keepdim=False)", "argmin(dim=[1], keepdim=False)"};
  for (int i = 0; i < 6; ++i) {
    at::Tensor x = g.tensor({19, 1, 4}, at::kFloat, tsfuse_test::kNaN | tsfuse_test::kInf),
               y = g.tensor({23, 4}, at::kFloat, tsfuse_test::kNaN | tsfuse_test::kSignedZero);
    EXPECT_TRUE(
        sameAll(tsfuse::evalChain(tsfuse::Chain::parse(kSq, stages), {x, y}), chained({x, y}, kSq, stages), true))
        << i;
  }
}

TEST_F(Chain, EmptyInputs) {
  const std::vector<std::string> stages{"sum(dim=[2], keepdim=False)", "sum(dim=[1], keepdim=False)"};
  for (auto [n, m, d] : {std::tuple<int64_t, int64_t, int64_t>{0, 4, 3}, {5, 0, 3}, {5, 4, 0}}) {
    at::Tensor x = at::randn({n, 1, d}), y = at::randn({m, d});
    EXPECT_TRUE(
        sameAll(tsfuse::evalChain(tsfuse::Chain::parse(kSq, stages), {x, y}), chained({x, y}, kSq, stages), true))
        << n << " " << m << " " << d;
  }
}

TEST_F(Chain, EagersOwnErrors) {
  using tsfuse_test::errorOf;
  // Large enough for slabs: the slab plan checks the later stages first.
  at::Tensor x = at::randn({40, 1, 3}), y = at::randn({30, 3});
  // A shape mismatch in stage 0: the message names the whole tensors' sizes, not a slab's.
  at::Tensor bad = at::randn({30, 4});
  EXPECT_EQ(errorOf([&] {
              tsfuse::reduceChain({x, bad}, kSq, {"sum(dim=[2], keepdim=False)", "sum(dim=[1], keepdim=False)"});
            }),
            errorOf([&] { at::sub(x, bad); }));
  // A later stage's dim out of range.
  const std::vector<std::string> far{"sum(dim=[2], keepdim=False)", "sum(dim=[5], keepdim=False)"};
  const std::string want = errorOf([&] { at::sum(at::randn({40, 30}), {5}); });
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(errorOf([&] { tsfuse::reduceChain({x, y}, kSq, far); }), want);
  // A later epilogue that does not broadcast with its operand.
  const std::vector<std::string> epi{"sum(dim=[2], keepdim=False)", "sum(dim=[1], keepdim=False) |> v1: mul($0, $1)"};
  at::Tensor w = at::randn({4});
  EXPECT_EQ(errorOf([&] { tsfuse::reduceChain({x, y, w}, kSq, epi); }), errorOf([&] { at::mul(at::randn({40}), w); }));
  // A later stage eager rejects for the dtype (mean of integers).
  const std::vector<std::string> mean{"sum(dim=[2], keepdim=False)", "mean(dim=[1], keepdim=False)"};
  at::Tensor xi = x.to(at::kInt), yi = y.to(at::kInt);
  const std::string wantMean = errorOf([&] { at::mean(at::sum(at::sub(xi, yi) * at::sub(xi, yi), {2}), {1}); });
  EXPECT_FALSE(wantMean.empty());
  EXPECT_EQ(errorOf([&] { tsfuse::reduceChain({xi, yi}, kSq, mean); }), wantMean);
}

TEST_F(Chain, MalformedStagesAreRejected) {
  using tsfuse_test::errorOf;
  at::Tensor x = at::randn({6, 1, 3}), y = at::randn({5, 3});
  EXPECT_NE(errorOf([&] {
              tsfuse::reduceChain({x, y}, kSq, {"sum(dim=[2], keepdim=False)"});
            }).find("at least two stages"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              tsfuse::reduceChain({x, y}, kSq, {"sum(dim=[2])", "sum(dim=[1], keepdim=False)"});
            }).find("expected ', keepdim='"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              tsfuse::reduceChain({x, y}, kSq, {"max(dim=[2], keepdim=False)", "sum(dim=[1], keepdim=False)"});
            }).find("only the last stage may be"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              tsfuse::reduceChain({x, y}, kSq, {"sum(dim=[2], keepdim=False)", "min(dim=[1], keepdim=False)"});
            }).find("reduce_chain_with_indices"),
            std::string::npos);
  // describe()'s text round-trips, dtype and parameters included.
  const std::vector<std::string> texts{"norm:3.0(dim=[2], keepdim=True)",
                                       "sum(dim=None, keepdim=False, dtype=float64)"};
  EXPECT_EQ(tsfuse::Chain::parse(kSq, texts).stageTexts(), texts);
}

// With a gradient, a chain of two sums runs fused (tests/ops/chain_autograd_test.cpp); a longer one
// runs unfused, so autograd records ATen's ops.
TEST_F(Chain, AutogradRunsLongerChainsUnfused) {
  at::Tensor x = at::randn({6, 1, 3}).requires_grad_(), y = at::randn({5, 3});
  const std::vector<std::string> two{"sum(dim=[2], keepdim=False) |> v1: neg($0); exp(%0)",
                                     "sum(dim=[1], keepdim=False)"};
  at::Tensor got = tsfuse::reduceChain({x, y}, kSq, two);
  EXPECT_STREQ(tsfuse::lastPath(), "native");
  std::vector<std::string> three = two;
  three[1] = "sum(dim=[1], keepdim=True)";
  three.push_back("sum(dim=[0], keepdim=False)");
  got = got + tsfuse::reduceChain({x, y}, kSq, three);
  EXPECT_STREQ(tsfuse::lastPath(), "eager");
  got.sum().backward();
  at::Tensor x2 = x.detach().clone().requires_grad_();
  at::Tensor k = at::exp(-((x2 - y) * (x2 - y)).sum(2)).sum(1);
  (k + k.sum()).sum().backward();
  EXPECT_TRUE(at::allclose(x.grad(), x2.grad()));
}

TEST_F(Chain, MetaGivesTheShapes) {
  at::Tensor x = at::empty({6, 1, 3}, at::kMeta), y = at::empty({5, 3}, at::kMeta);
  auto [v, i] =
      tsfuse::reduceChainWithIndices({x, y}, kSq, {"sum(dim=[2], keepdim=False)", "min(dim=[0], keepdim=True)"});
  EXPECT_EQ(v.sizes(), at::IntArrayRef({1, 5}));
  EXPECT_EQ(i.scalar_type(), at::kLong);
}

}  // namespace

}  // namespace ops_chain_test
