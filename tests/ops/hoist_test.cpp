// Hoisting costly narrow work out of a fused call (kernels/runtime/hoist.h): which instructions leave the
// program (a transcendental over at most a quarter of the space's elements; per slab of rows where
// it holds more than every operand) and which stay (over the whole space, cheap ones, wider ones,
// those of a tiny call), the rewritten program and its
// operands, and the call's values, errors and donation unchanged: eager's bits, eager's error
// where a dead instruction raises, the donated operand still taken.
#include "test_util.h"

#include "kernels/runtime/hoist.h"
#include "jit_support.h"
#include "tsfuse/ops.h"

namespace ops_hoist_test {

namespace {

using tsfuse::hoistNarrowWork;
using tsfuse_test::Gen;
using tsfuse_test::pairwiseBoxed;
using tsfuse_test::sameTensor;

// Complete IoU's aspect term: atan(w / h) of each of M boxes, against every one of N.
TEST(Hoist, APerBoxAtanLeavesTheProgram) {
  Gen g(71);
  const at::Tensor w = g.tensor({1, 100}, at::kFloat).abs() + 1, h = g.tensor({1, 100}, at::kFloat).abs() + 1;
  const at::Tensor x = g.tensor({80, 100}, at::kFloat);
  const std::string expr = "v1: div($0, $1); atan(%0); sub($2, %1)";
  const auto hoisted = hoistNarrowWork(tsfuse::Expr::parse(expr), {w, h, x});
  ASSERT_TRUE(hoisted.has_value());
  EXPECT_EQ(hoisted->expr, "v1: sub($0, $1)");  // w and h no longer read; atan(w / h) is $1
  ASSERT_EQ(hoisted->operands.size(), 2u);
  EXPECT_TRUE(hoisted->operands[0].is_same(x));
  EXPECT_TRUE(sameTensor(at::atan(w / h), hoisted->operands[1], true));
  EXPECT_EQ(hoisted->position, (std::vector<int64_t>{-1, -1, 0}));
  EXPECT_TRUE(sameTensor(x - at::atan(w / h), pairwiseBoxed(std::vector<at::Tensor>({w, h, x}), expr), true));
}

TEST(Hoist, WorkOverTheWholeSpaceCheapOrWideStays) {
  Gen g(72);
  const at::Tensor row = g.tensor({1, 100}, at::kFloat), col = g.tensor({80, 1}, at::kFloat);
  const at::Tensor two = g.tensor({2, 100}, at::kFloat), tinyRow = g.tensor({1, 50}, at::kFloat);
  const at::Tensor tinyCol = g.tensor({40, 1}, at::kFloat);
  struct Case {
    const char* name;
    std::string expr;
    std::vector<at::Tensor> ops;
  };
  for (const Case& c : {Case{"exp over the whole space", "v1: sub($0, $1); exp(%0)", {row, col}},
                        Case{"cheap narrow work", "v1: mul($0, 2.0); add(%0, $1)", {row, col}},
                        Case{"over half the space", "v1: exp($0); add(%0, $1)", {row, two}},
                        Case{"a tiny call (2000 values)", "v1: exp($0); add(%0, $1)", {tinyRow, tinyCol}}}) {
    EXPECT_FALSE(hoistNarrowWork(tsfuse::Expr::parse(c.expr), c.ops).has_value()) << c.name;
  }
}

// Each of the two sides' costly values leaves; a cheap instruction read by both the cone and the
// rest stays in the rest; values equal eager's over float64 too.
TEST(Hoist, BothSidesAndSharedCheapWork) {
  Gen g(73);
  for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
    const at::Tensor a = g.tensor({100, 1}, dt), b = g.tensor({1, 60}, dt);
    const std::string expr = "v1: mul($0, 0.5); exp(%0); log1p($1); add(%1, %2); mul(%3, %0)";
    const auto hoisted = hoistNarrowWork(tsfuse::Expr::parse(expr), {a, b});
    ASSERT_TRUE(hoisted.has_value());
    EXPECT_EQ(hoisted->expr, "v1: mul($0, 0.5); add($1, $2); mul(%1, %0)");
    const at::Tensor want = (at::exp(a * 0.5) + at::log1p(b)) * (a * 0.5);
    EXPECT_TRUE(sameTensor(want, pairwiseBoxed(std::vector<at::Tensor>({a, b}), expr), true)) << dt;
  }
}

// Eager evaluates every instruction: a dead one that raises (where over an int64 condition) still
// raises through the fused op when a costly value before it is hoisted.
TEST(Hoist, ADeadInstructionStillRaisesEagersError) {
  Gen g(74);
  const at::Tensor a = g.tensor({1, 128}, at::kFloat), cond = g.tensor({64, 128}, at::kLong);
  ASSERT_TRUE(hoistNarrowWork(tsfuse::Expr::parse("v1: exp($0); where($1, $0, 1.0); add(%0, $1)"), {a, cond}));
  const std::string expr = "v1: exp($0); where($1, $0, 1.0); add(%0, $1)";
  const std::string eager = tsfuse_test::errorOf([&] { tsfuse::evalAten(tsfuse::Expr::parse(expr), {a, cond}); }, true);
  const std::string fused = tsfuse_test::errorOf(
      [&] {
        pairwiseBoxed(std::vector<at::Tensor>({a, cond}), expr);
      },
      true);
  EXPECT_FALSE(eager.empty());
  EXPECT_EQ(eager, fused);
}

// torchani's angular terms: exp over [T, 8] and cos, pow over [T, 4], their product over
// [T, 8, 4]. Each costly value holds more than every operand, so the call runs in slabs of rows,
// each hoisting them at its own shape: every value computed once per element, at most 2 MiB of them
// held at a time (a ragged last slab too), eager's layout, and eager's bits from MKL's routines
// (exp, cos). pow by a tensor exponent keeps its documented contract (docs/exactness.md: ATen's
// vector and scalar loops split where eager's threads split its chunks): within 2 ulps.
TEST(Hoist, ValuesWiderThanEveryOperandAreHoistedPerSlab) {
  Gen g(79);
  for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
    const int64_t t = 50021;
    const at::Tensor d = g.tensor({t, 1, 1}, dt), shifts = g.tensor({1, 8, 1}, dt);
    const at::Tensor angles = g.tensor({t, 1, 1}, dt), sections = g.tensor({1, 1, 4}, dt);
    const at::Tensor zeta = g.tensor({1}, dt).abs() + 1;
    const std::string radial = "v1: sub($0, $1); mul(%0, %0); neg(%1); exp(%2); sub($2, $3); cos(%4); add(%5, 1); ";
    const at::Tensor exps = at::exp(at::neg((d - shifts) * (d - shifts))), cosines = at::cos(angles - sections) + 1;
    const std::vector<at::Tensor> ops = {d, shifts, angles, sections};
    const tsfuse::Expr e = tsfuse::Expr::parse(radial + "mul(%3, %6)");
    EXPECT_FALSE(hoistNarrowWork(e, ops).has_value()) << "[T, 8] and [T, 4] hold more than every operand";
    const std::optional<tsfuse::SlabRows> slabs = tsfuse::hoistSlabRows(e, ops);
    ASSERT_TRUE(slabs.has_value());
    EXPECT_EQ(slabs->space, (std::vector<int64_t>{t, 8, 4}));
    EXPECT_EQ(slabs->rows % 64, 0);
    EXPECT_LT(slabs->rows, t);  // (several slabs, the last one ragged)
    EXPECT_TRUE(sameTensor(exps * cosines, pairwiseBoxed(ops, e.str()), true)) << dt;
    EXPECT_STREQ(tsfuse::lastPath(), "hoisted_slabs");

    const at::Tensor got = pairwiseBoxed({d, shifts, angles, sections, zeta}, radial + "pow(%6, $4); mul(%3, %7)");
    EXPECT_STREQ(tsfuse::lastPath(), "hoisted_slabs");
    const at::Tensor want = exps * at::pow(cosines, zeta);
    const double ulp = dt == at::kFloat ? 0x1p-23 : 0x1p-52;
    EXPECT_EQ(got.strides(), want.strides());
    EXPECT_TRUE(at::allclose(got, want, 3 * ulp, 0)) << dt;

    // A transposed operand: the output's layout would be the operands' to decide; one call.
    const at::Tensor strided = g.tensor({4, 1, t}, dt).transpose(0, 2);
    EXPECT_FALSE(
        tsfuse::hoistSlabRows(tsfuse::Expr::parse("v1: sub($0, $1); exp(%0); mul(%1, $2)"), {d, shifts, strided})
            .has_value());
  }
}

// The donated operand (the wide one, read in place) still takes the result.
TEST(Hoist, TheDonatedOperandStillTakesTheResult) {
  Gen g(75);
  const at::Tensor a = g.tensor({1, 300}, at::kFloat), b = g.tensor({64, 300}, at::kFloat);
  const at::Tensor want = at::exp(a) + b;
  std::vector<at::Tensor> ops;
  ops.push_back(a);
  ops.push_back(b.clone());
  const void* memory = ops[1].data_ptr();
  const at::Tensor out = pairwiseBoxed(std::move(ops), "v1: exp($0); add(%0, $1)", {1});
  EXPECT_EQ(out.data_ptr(), memory);
  EXPECT_TRUE(sameTensor(want, out, true));
}

// A reduction with an epilogue and its own operand: the hoisted values go between the
// expression's operands and the epilogue's, which it still reads.
TEST(Hoist, AReductionsEpilogueOperandsFollowTheHoistedValues) {
  Gen g(76);
  const at::Tensor a = g.tensor({1, 60}, at::kFloat), b = g.tensor({100, 60}, at::kFloat);
  const at::Tensor scale = g.tensor({100}, at::kFloat);
  const at::Tensor got = tsfuse::reduce({a, b, scale}, "v1: atan($0); mul(%0, $1)", "amax", std::vector<int64_t>{1},
                                        false, std::nullopt, "v1: mul($0, $1)");
  EXPECT_TRUE(sameTensor(at::amax(at::atan(a) * b, {1}) * scale, got, true));
}

// pow by an exponent the program computes from a one-value parameter (a rational-quadratic
// kernel's -alpha, alpha = exp(raw)): the exponent is computed once, as eager computes it, so the
// pow runs as the routine with a one-value exponent, not as ATen on each tile (a computed exponent
// is a value per lane there). exp(raw) * 2 leaves too, as the narrow work around costly exp(raw).
TEST(Hoist, AnExponentComputedFromOneValueLeavesTheProgram) {
  Gen g(77);
  for (at::ScalarType dt : {at::kFloat, at::kDouble}) {
    const at::Tensor d = g.tensor({64, 1}, dt).abs(), raw = g.tensor({}, dt), c = g.tensor({1, 512}, dt).abs();
    const std::string expr = "v1: add($0, $2); exp($1); mul(%1, 2); div(%0, %2); add(%3, 1); neg(%1); pow(%4, %5)";
    const auto hoisted = hoistNarrowWork(tsfuse::Expr::parse(expr), {d, raw, c});
    ASSERT_TRUE(hoisted.has_value());
    EXPECT_EQ(hoisted->expr, "v1: add($0, $1); div(%0, $3); add(%1, 1); pow(%2, $2)");
    ASSERT_EQ(hoisted->operands.size(), 4u);
    EXPECT_TRUE(sameTensor(-at::exp(raw), hoisted->operands[2], true));
    EXPECT_TRUE(sameTensor(at::exp(raw) * 2, hoisted->operands[3], true));
    const at::Tensor want = at::pow((d + c) / (at::exp(raw) * 2) + 1, -at::exp(raw));
    const tsfuse::PathCounts before = tsfuse::pathCounts();
    EXPECT_TRUE(sameTensor(want, pairwiseBoxed(std::vector<at::Tensor>({d, raw, c}), expr), true)) << dt;
    if (tsfuse_test::haveJit()) EXPECT_EQ(tsfuse::pathCounts().atenTileOps, before.atenTileOps) << dt;
  }
  // However small the call: one ATen call for the exponent replaces one pow per tile.
  const at::Tensor small = g.tensor({8, 1}, at::kFloat), raw = g.tensor({}, at::kFloat);
  const auto tiny = hoistNarrowWork(tsfuse::Expr::parse("v1: mul($1, 2); pow($0, %0)"), {small, raw});
  ASSERT_TRUE(tiny.has_value());
  EXPECT_EQ(tiny->expr, "v1: pow($0, $1)");
}

// Integer work over a narrow sub-space (a triplet mask's labels[:, None] == labels[None] inside a
// [B, B, B] program) leaves the program: the compiled kernels hold float and bool lanes only, so it
// would keep the whole tile interpreted. Computed once at [B, B, 1], as eager computes it.
// The narrow computation around costly work leaves whole (torch_geometric's DimeNet envelope, a
// polynomial around x ** (p - 1) over [E, 1], times sin(f x) over [E, K]; atan stands for the
// costly op here): one hoisted value, neither its cheap ops recomputed per element of [E, K] nor
// its parts each read as an operand.
TEST(Hoist, TheNarrowWorkAroundCostlyWorkLeavesWhole) {
  Gen g(79);
  const at::Tensor x = g.tensor({2000, 1}, at::kFloat), f = g.tensor({6}, at::kFloat);
  const std::string expr = "v1: atan($0); mul(%0, $0); mul(%1, -21.0); add(%2, 1.0); mul($1, $0); sin(%4); mul(%3, %5)";
  const auto hoisted = hoistNarrowWork(tsfuse::Expr::parse(expr), {x, f});
  ASSERT_TRUE(hoisted.has_value());
  EXPECT_EQ(hoisted->expr, "v1: mul($1, $0); sin(%0); mul($2, %1)");
  ASSERT_EQ(hoisted->operands.size(), 3u);
  const at::Tensor envelope = at::atan(x) * x * -21.0 + 1.0;
  EXPECT_TRUE(sameTensor(envelope, hoisted->operands[2], true));
  EXPECT_TRUE(sameTensor(envelope * at::sin(f * x), pairwiseBoxed(std::vector<at::Tensor>({x, f}), expr), true));
}

TEST(Hoist, NarrowIntegerWorkLeavesTheProgram) {
  Gen g(78);
  const at::Tensor labels = g.tensor({32}, at::kLong).remainder(5), mask = g.tensor({32, 32, 32}, at::kBool);
  const at::Tensor a = labels.view({32, 1, 1}), b = labels.view({1, 32, 1});
  const std::string expr = "v1: eq($0, $1); bitwise_and(%0, $2)";
  const auto hoisted = hoistNarrowWork(tsfuse::Expr::parse(expr), {a, b, mask});
  ASSERT_TRUE(hoisted.has_value());
  EXPECT_EQ(hoisted->expr, "v1: bitwise_and($1, $0)");
  ASSERT_EQ(hoisted->operands.size(), 2u);
  EXPECT_TRUE(sameTensor(at::eq(a, b), hoisted->operands[1], true));
  const tsfuse::PathCounts before = tsfuse::pathCounts();
  EXPECT_TRUE(sameTensor(at::eq(a, b) & mask, pairwiseBoxed(std::vector<at::Tensor>({a, b, mask}), expr), true));
  if (tsfuse_test::haveJit()) EXPECT_EQ(tsfuse::pathCounts().interpretedTiles, before.interpretedTiles);
}

// labels[None] == labels[:, None] over the whole [B, B] space (too wide to hoist) masking a float
// value: the labels, small integers, are compared as float32, exactly, and the program compiles.
// Labels past 2^24, or an integer operand another op reads too, stay integers. Expanded labels
// count by the values they hold.
TEST(Hoist, NarrowIntegersReadOnlyByComparesAreComparedAsFloats) {
  Gen g(79);
  const at::Tensor d = g.tensor({64, 64}, at::kFloat);
  const std::string expr = "v1: eq($0, $1); to(%0, float32); mul(%1, $2)";
  for (int64_t big : {int64_t(0), (int64_t(1) << 24) + 1}) {
    const at::Tensor labels = g.tensor({64}, at::kLong).remainder(7) + big;
    const at::Tensor a = labels.view({1, 64}), b = labels.view({64, 1});
    const auto c = tsfuse::compareIntegersAsFloats(tsfuse::Expr::parse(expr), {a, b, d});
    ASSERT_EQ(c.has_value(), big == 0) << big;
    if (c) {
      EXPECT_EQ(c->expr, expr);
      EXPECT_EQ(c->operands[0].scalar_type(), at::kFloat);
      EXPECT_TRUE(c->operands[2].is_same(d));
    }
    const tsfuse::PathCounts before = tsfuse::pathCounts();
    EXPECT_TRUE(
        sameTensor(at::eq(a, b).to(at::kFloat) * d, pairwiseBoxed(std::vector<at::Tensor>({a, b, d}), expr), true));
    if (tsfuse_test::haveJit() && big == 0) EXPECT_EQ(tsfuse::pathCounts().interpretedTiles, before.interpretedTiles);
  }
  // SOLOv2's labels.expand(n, n) against its transpose: expanded views, counted and converted by
  // the 64 labels they hold, the zero strides kept (nothing [64, 64] converted).
  {
    const at::Tensor labels = g.tensor({64}, at::kLong).remainder(7);
    const at::Tensor a = labels.expand({64, 64}), b = a.transpose(1, 0);
    const auto c = tsfuse::compareIntegersAsFloats(tsfuse::Expr::parse(expr), {a, b, d});
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->operands[0].scalar_type(), at::kFloat);
    EXPECT_EQ(c->operands[0].strides(), a.strides());
    EXPECT_EQ(c->operands[1].strides(), b.strides());
    const tsfuse::PathCounts before = tsfuse::pathCounts();
    EXPECT_TRUE(
        sameTensor(at::eq(a, b).to(at::kFloat) * d, pairwiseBoxed(std::vector<at::Tensor>({a, b, d}), expr), true));
    if (tsfuse_test::haveJit()) EXPECT_EQ(tsfuse::pathCounts().interpretedTiles, before.interpretedTiles);
  }
  const at::Tensor labels = g.tensor({64}, at::kLong).remainder(7);
  EXPECT_FALSE(tsfuse::compareIntegersAsFloats(tsfuse::Expr::parse("v1: eq($0, $1); add($0, %0)"),
                                               {labels.view({1, 64}), labels.view({64, 1})}));
  // One side in range, the other not: both stay integers (2^24 and 2^24 + 1 are one float32).
  const at::Tensor near = at::full({1, 64}, int64_t(1) << 24, at::kLong);
  const at::Tensor past = at::full({64, 1}, (int64_t(1) << 24) + 1, at::kLong);
  EXPECT_FALSE(tsfuse::compareIntegersAsFloats(tsfuse::Expr::parse(expr), {near, past, d}));
  EXPECT_TRUE(sameTensor(at::eq(near, past).to(at::kFloat) * d,
                         pairwiseBoxed(std::vector<at::Tensor>({near, past, d}), expr), true));
  // Every integer dtype, -2^24 in range and -2^24 - 1 not, a transposed row (dense), a strided slice
  // (not dense), float64 programs converting to float64.
  for (at::ScalarType dt : {at::kByte, at::kChar, at::kShort, at::kInt, at::kLong})
    for (at::ScalarType ft : {at::kFloat, at::kDouble}) {
      const at::Tensor f = g.tensor({64, 64}, ft);
      const at::Tensor row = g.tensor({1, 64}, dt).remainder(5), col = g.tensor({1, 64}, dt).remainder(5).t();
      const at::Tensor strided = g.tensor({1, 128}, dt).remainder(5).slice(1, 0, 128, 2);
      for (const auto& [a, b] : {std::pair{row, col}, std::pair{strided, col}}) {
        const auto c = tsfuse::compareIntegersAsFloats(tsfuse::Expr::parse(expr), {a, b, f});
        ASSERT_TRUE(c.has_value()) << dt;
        EXPECT_EQ(c->operands[0].scalar_type(), ft);
        EXPECT_TRUE(at::equal(c->operands[0], a.to(ft))) << dt;
        EXPECT_TRUE(at::equal(c->operands[1], b.to(ft))) << dt;
        EXPECT_EQ(c->operands[1].strides(), b.strides());  // (dense: the layout kept)
        EXPECT_TRUE(sameTensor(
            at::eq(a, b).to(ft) * f,
            pairwiseBoxed(
                std::vector<at::Tensor>({a, b, f}),
                "v1: eq($0, $1); to(%0, " + std::string(ft == at::kFloat ? "float32" : "float64") + "); mul(%1, $2)"),
            true))
            << dt << " " << ft;
      }
      if (dt != at::kLong) continue;
      for (int64_t edge : {-(int64_t(1) << 24), -(int64_t(1) << 24) - 1}) {
        const at::Tensor a = row.clone();
        a[0][5] = edge;
        EXPECT_EQ(tsfuse::compareIntegersAsFloats(tsfuse::Expr::parse(expr), {a, col, f}).has_value(),
                  edge >= -(int64_t(1) << 24) || ft == at::kDouble)
            << edge << " " << ft;
      }
    }
}

// A number beside integer operands is cast to their promoted dtype in eager, wrapping where that
// dtype does not hold it (a uint8 mask > -1 compares with 255: false everywhere). Such a compare
// keeps its integers; one whose numbers the dtype holds is compared as floats. The fuzzer's
// program: an expanded uint8 operand (narrow, so converted), `x > -1` then where.
TEST(Hoist, NumbersOutsideTheComparedIntegerDtypeKeepItsIntegers) {
  Gen g(80);
  const at::Tensor f = g.tensor({31, 64}, at::kFloat);
  struct Case {
    at::ScalarType dt;
    int64_t number;
    bool converted;
  };
  for (const Case& k : {Case{at::kByte, -1, false}, Case{at::kByte, 256, false}, Case{at::kByte, 255, true},
                        Case{at::kChar, 128, false}, Case{at::kChar, -128, true}, Case{at::kShort, 40000, false},
                        Case{at::kInt, int64_t(1) << 31, false}, Case{at::kLong, -1, true}}) {
    const at::Tensor x = g.tensor({31, 1}, k.dt).expand({31, 64});
    for (const char* cmp : {"gt", "eq", "le"}) {
      const std::string expr =
          std::string("v1: ") + cmp + "($0, " + std::to_string(k.number) + "); where(%0, $1, -2.5)";
      const auto c = tsfuse::compareIntegersAsFloats(tsfuse::Expr::parse(expr), {x, f});
      EXPECT_EQ(c.has_value(), k.converted) << k.dt << " " << k.number;
      const at::Scalar n(k.number);
      const at::Tensor mask = std::string(cmp) == "gt"   ? at::gt(x, n)
                              : std::string(cmp) == "eq" ? at::eq(x, n)
                                                         : at::le(x, n);
      EXPECT_TRUE(sameTensor(at::where(mask, f, -2.5), pairwiseBoxed(std::vector<at::Tensor>({x, f}), expr), true))
          << k.dt << " " << cmp << " " << k.number;
    }
  }
}

}  // namespace

}  // namespace ops_hoist_test
