// IR-string tests of canonicalize's x[mask] = c rewrite (passes/canonicalize.cpp,
// tryBoolMaskFill): index_put_ of a bool mask of x's own layout on a fresh intermediate becomes
// where(mask, c, x) (scripting's value tensor where c's conversion to x's dtype is not known) and
// joins the fused region; named negative cases keep index_put_ where the two could differ
// (another mask shape, a non-bool mask, accumulate, a graph input). Each rewrite runs
// before/after through the interpreter, values, dtypes and strides compared.
#include "ir_util.h"

#include "passes/canonicalize.h"

namespace ir_bool_mask_fill_test {

namespace {

using namespace tsfuse_test;

std::shared_ptr<Graph> graphOf(const std::string& body) {
  return graphWithConstants("%a : Tensor, %b : Tensor", body,
                            "  %half : float = prim::Constant[value=0.5]()\n"
                            "  %tenth : float = prim::Constant[value=0.1]()\n");
}

// %x = %a / %b ([6, 5], floating), x[mask] = c, then x read and returned.
std::shared_ptr<Graph> write(const std::string& mask, const std::string& c, const std::string& accumulate = "%false") {
  return graphOf("  %x : Tensor = aten::div(%a, %b)\n  %mask : Tensor = " + mask + "\n  %c : " + c + "\n" +
                 maskWriteIR("%x", "%mask", "%c", "", accumulate) +
                 "  %y : Tensor = aten::mul(%x, %two)\n  return (%y, %x)\n");
}

std::vector<c10::IValue> inputs(uint64_t seed) {
  Gen g(seed);
  return {g.tensor({6, 1}, at::kFloat), g.tensor({1, 5}, at::kFloat)};
}

PassRun canonicalize(std::shared_ptr<Graph>& g) { return runPass(g, tsfuse::Canonicalize); }

TEST(BoolMaskFillIR, ComparisonOfTheValueBecomesWhereAndFuses) {
  auto g = write("aten::lt(%x, %half)", "int = prim::Constant[value=-3]()");
  auto ref = g->copy();
  PassRun c = canonicalize(g);
  EXPECT_EQ(c.rewrites(), 1) << c.dump();
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) {
    fc.check_not("aten::index_put_")->check("aten::where(")->check_not("aten::tensor(");
  }));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(1)));
  PassRun p = runPipelineOn(g);
  ASSERT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << p.dump();
  EXPECT_NE(exprOf(findNodes(g, "tsfuse::pairwise")[0]).find("where("), std::string::npos);
  EXPECT_TRUE(sameOutputs(ref, g, inputs(2)));
}

TEST(BoolMaskFillIR, ZeroDimTargetRaisesAsIndexPutDoes) {
  // index_put_ raises for a 0-dim x (x[mask] = c in Python does not, TorchScript's graph does);
  // where() would not. The rewrite keeps the error, read from the ranks of a and b, and the
  // region still fuses.
  auto g = write("aten::lt(%x, %half)", "int = prim::Constant[value=-3]()");
  auto ref = g->copy();
  PassRun c = canonicalize(g);
  EXPECT_EQ(c.rewrites(), 1) << c.dump();
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) {
    fc.check("aten::dim(%a)")->check("aten::dim(%b)")->check("prim::RaiseException")->check("aten::where(");
  }));
  Gen gen(5);
  const std::vector<c10::IValue> scalars = {gen.tensor({}, at::kFloat), gen.tensor({}, at::kFloat)};
  const std::string error = errorOf(ref, scalars);
  EXPECT_NE(error.find("too many indices for tensor of dimension 0"), std::string::npos) << error;
  EXPECT_EQ(errorOf(g, scalars), error);
  PassRun p = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << p.dump();
  EXPECT_EQ(errorOf(g, scalars), error);
  EXPECT_TRUE(sameOutputs(ref, g, inputs(6)));
  // x = a[None] / b: its rank is proven, no check.
  auto h = graphOf(
      "  %u : Tensor = aten::unsqueeze(%a, %zero)\n  %x : Tensor = aten::div(%u, %b)\n"
      "  %mask : Tensor = aten::lt(%x, %half)\n  %c : int = prim::Constant[value=-3]()\n" +
      maskWriteIR("%x", "%mask", "%c") + "  return (%x)\n");
  PassRun d = canonicalize(h);
  EXPECT_EQ(d.rewrites(), 1) << d.dump();
  EXPECT_TRUE(fileCheck(d.ir, [](FileCheck& fc) { fc.check_not("prim::RaiseException")->check("aten::where("); }));
}

TEST(BoolMaskFillIR, SecondWriteMaskedByTheFirstResult) {
  // torchvision's Matcher: two writes, the second's mask computed after the first write (from
  // x's new value, known to keep x's shape), one of them through & of two comparisons.
  auto g = graphOf("  %x : Tensor = aten::div(%a, %b)\n  %lo : Tensor = aten::lt(%x, %half)\n" +
                   maskWriteIR("%x", "%lo", "%m1", "1") +
                   "  %ge : Tensor = aten::ge(%x, %tenth)\n  %le : Tensor = aten::le(%x, %half)\n"
                   "  %mid : Tensor = aten::__and__(%ge, %le)\n" +
                   maskWriteIR("%x", "%mid", "%two", "2") + "  return (%x, %w1)\n");
  auto ref = g->copy();
  PassRun c = canonicalize(g);
  EXPECT_EQ(c.rewrites(), 2) << c.dump();
  EXPECT_TRUE(fileCheck(
      c.ir, [](FileCheck& fc) { fc.check_not("aten::index_put_")->check("aten::where(")->check("aten::where("); }));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(3)));
  PassRun p = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << p.dump();
  EXPECT_TRUE(sameOutputs(ref, g, inputs(4)));
}

TEST(BoolMaskFillIR, StridesOfATransposedIntermediateAreKept) {
  // x = a.t() / 2 is laid out column-major; index_put_ writes it in place (keeping that layout),
  // and so does where(mask, c, x) over a mask of x's layout (masked_fill would return rows).
  auto g = graphWithConstants("%a : Tensor",
                              "  %at : Tensor = aten::t(%a)\n  %x : Tensor = aten::div(%at, %two)\n"
                              "  %mask : Tensor = aten::eq(%x, %x)\n  %c : float = prim::Constant[value=2.5]()\n" +
                                  maskWriteIR("%x", "%mask", "%c") + "  return (%x)\n");
  auto ref = g->copy();
  PassRun c = canonicalize(g);
  EXPECT_EQ(c.rewrites(), 1) << c.dump();
  Gen gen(6);
  at::Tensor a = gen.tensor({5, 8}, at::kFloat);
  a.view(-1).index_put_({at::arange(0, 40, 3)}, at::full({}, NAN));
  EXPECT_TRUE(sameOutputs(ref, g, {a}));
  PassRun p = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << p.dump();
  EXPECT_TRUE(sameOutputs(ref, g, {a}));
}

TEST(BoolMaskFillIR, WriteAfterAReductionFuses) {
  // d = |a - b|.sum(1); d[d < 0.5] = 0: a sum is never bool, so 0 converts exactly, and the
  // write becomes the sum's epilogue: where(lt(d, 0.5), 0, d) reads d twice, and nothing else
  // reads d or the mask.
  auto g = graphOf(
      "  %s : Tensor = aten::sub(%a, %b, %one)\n  %ab : Tensor = aten::abs(%s)\n"
      "  %d : Tensor = aten::sum(%ab, %dims1, %false, %none)\n  %mask : Tensor = aten::lt(%d, %half)\n" +
      maskWriteIR("%d", "%mask", "%zero") + "  return (%d)\n");
  auto ref = g->copy();
  PassRun p = runPipelineOn(g);
  EXPECT_TRUE(fileCheck(p.ir, [](FileCheck& fc) {
    fc.check("lt($0, 0.5); where(%0, 0, $0)")
        ->check("tsfuse::reduce(")
        ->check_not("tsfuse::pairwise")
        ->check_not("aten::index_put_");
  }));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(7)));
}

// |a|^2 - 2.0 * a b^T + |b|^2 with negatives zeroed (a triplet loss's distances,
// `distances[distances < 0] = 0`): 2.0 * (anything) is floating, so is each sum of it; int64
// operands included, as eager promotes them.
TEST(BoolMaskFillIR, ValuePromotedByAFloatNumberIsKnownFloating) {
  auto g = graphOf(
      "  %twof : float = prim::Constant[value=2.]()\n  %m : Tensor = aten::mul(%b, %twof)\n"
      "  %s : Tensor = aten::sub(%a, %m, %one)\n  %x : Tensor = aten::add(%s, %a, %one)\n"
      "  %mask : Tensor = aten::lt(%x, %zero)\n" +
      maskWriteIR("%x", "%mask", "%zero") + "  %y : Tensor = aten::sqrt(%x)\n  return (%y)\n");
  auto ref = g->copy();
  PassRun c = canonicalize(g);
  EXPECT_EQ(c.rewrites(), 1) << c.dump();
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check_not("aten::index_put_")->check("aten::where("); }));
  Gen gen(9);
  EXPECT_TRUE(sameOutputs(ref, g, inputs(4)));
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({6, 1}, at::kLong), gen.tensor({1, 5}, at::kLong)}));
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({6, 1}, at::kDouble), gen.tensor({1, 5}, at::kInt)}));
}

TEST(BoolMaskFillIR, ScriptedValueOfABoolTargetIsWrittenAsIs) {
  // x = a & b is bool: where(mask, 0, x) would promote it to int64; scripting's value is
  // tensor(0, dtype=x.dtype, device=x.device), a bool 0-dim tensor, which where() writes as it is.
  auto g = graphOf("  %x : Tensor = aten::logical_and(%a, %b)\n  %mask : Tensor = aten::logical_not(%x)\n" +
                   maskWriteIR("%x", "%mask", "%zero") + "  return (%x)\n");
  auto ref = g->copy();
  PassRun c = canonicalize(g);
  EXPECT_EQ(c.rewrites(), 1) << c.dump();
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check("aten::tensor(")->check("aten::where("); }));
  Gen gen(10);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({6, 1}, at::kBool), gen.tensor({1, 5}, at::kBool)}));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(5)));
}

TEST(BoolMaskFillIR, NegativeMaskOfAnotherShape) {
  // %b < 0.5 is [1, 5]: index_put_ raises for it on a [6, 5] x where where() would broadcast.
  auto g = write("aten::lt(%b, %half)", "int = prim::Constant[value=0]()");
  PassRun c = canonicalize(g);
  EXPECT_EQ(c.rewrites(), 0) << c.dump();
  EXPECT_TRUE(c.rejectedWith("is not provably of")) << c.dump();
}

TEST(BoolMaskFillIR, NegativeMaskNotProvablyBool) {
  // x[x * 0] = 0 indexes with a float tensor: index_put_ raises, where() would too, but
  // differently.
  auto g = write("aten::mul(%x, %zero)", "int = prim::Constant[value=0]()");
  PassRun c = canonicalize(g);
  EXPECT_TRUE(c.rejectedWith("is not provably a bool tensor")) << c.dump();
}

TEST(BoolMaskFillIR, NegativeAccumulate) {
  auto g = write("aten::lt(%x, %half)", "int = prim::Constant[value=2]()", "%true");
  PassRun c = canonicalize(g);
  EXPECT_TRUE(c.rejectedWith("accumulate is not a constant False")) << c.dump();
}

TEST(BoolMaskFillIR, ScriptedValueWhoseConversionIsNotKnownIsWrittenAsIs) {
  // 0.1 is not a float, -1 may not fit x = a - b (unsigned) or x = a + 2: where(mask, c, x) could
  // convert c otherwise than tensor(c, dtype=x.dtype) does, so where() writes that tensor.
  const std::vector<std::shared_ptr<Graph>> graphs = {
      write("aten::lt(%x, %half)", "float = prim::Constant[value=0.1]()"),
      graphOf("  %x : Tensor = aten::sub(%a, %b, %one)\n  %mask : Tensor = aten::ne(%x, %zero)\n" +
              maskWriteIR("%x", "%mask", "%m1") + "  return (%x)\n"),
      graphOf("  %x : Tensor = aten::add(%a, %two, %one)\n  %mask : Tensor = aten::ne(%x, %zero)\n" +
              maskWriteIR("%x", "%mask", "%m1") + "  return (%x)\n")};
  for (size_t k = 0; k < graphs.size(); ++k) {
    auto g = graphs[k];
    auto ref = g->copy();
    PassRun c = canonicalize(g);
    EXPECT_EQ(c.rewrites(), 1) << c.dump();
    EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check_not("aten::index_put_")->check("aten::where("); }));
    Gen gen(11);
    EXPECT_TRUE(sameOutputs(ref, g, inputs(6)));
    if (k == 0) continue;  // (true division: floating only)
    for (at::ScalarType t : {at::kByte, at::kChar, at::kInt, at::kLong})
      EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({6, 1}, t), gen.tensor({1, 5}, t)})) << t;
  }
}

TEST(BoolMaskFillIR, NegativeGraphInput) {
  auto g = graphOf("  %mask : Tensor = aten::ne(%a, %a)\n" + maskWriteIR("%a", "%mask", "%zero") + "  return (%a)\n");
  PassRun c = canonicalize(g);
  EXPECT_TRUE(c.rejectedWith("is not a fresh result")) << c.dump();
}

}  // namespace

}  // namespace ir_bool_mask_fill_test
