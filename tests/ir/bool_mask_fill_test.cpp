// IR-string tests of canonicalize's x[mask] = c rewrite (passes/canonicalize.cpp,
// tryBoolMaskFill): index_put_ of a bool mask of x's own layout on a fresh intermediate becomes
// where(mask, c, x) and joins the fused region; named negative cases keep index_put_ where the
// two could differ (another mask shape, a non-bool mask, accumulate, a fill value whose
// conversion to x's dtype is not known, a bool x, a graph input). Each rewrite runs
// before/after through the interpreter, values, dtypes and strides compared.
#include "ir_util.h"

#include "passes/canonicalize.h"

namespace {

using namespace tsfuse_test;

// %x = %a / %b ([6, 5], floating), then `body`, which writes through %idx (the index list) and
// %val (aten::tensor(%c, x.dtype, x.device)); %c and the mask are the body's.
std::shared_ptr<Graph> write(const std::string& mask, const std::string& c, const std::string& extra = "",
                             const std::string& target = "%x", const std::string& accumulate = "%false") {
  const std::string body = R"IR(
  %x : Tensor = aten::div(%a, %b)
)IR" + extra + "  %mask : Tensor = " + mask + "\n" + "  %c : " + c + "\n" +
                           "  %dt : int = prim::dtype(" + target + ")\n" + "  %dev : Device = prim::device(" + target +
                           ")\n" + R"IR(
  %val : Tensor = aten::tensor(%c, %dt, %dev, %false)
  %idx : Tensor?[] = prim::ListConstruct(%mask)
)IR" + "  %w : Tensor = aten::index_put_(" + target + ", %idx, %val, " + accumulate + ")\n" +
                           "  %y : Tensor = aten::mul(" + target + ", %two)\n  return (%y, " + target + ")\n";
  return graphWithConstants("%a : Tensor, %b : Tensor", body,
                            "  %half : float = prim::Constant[value=0.5]()\n"
                            "  %tenth : float = prim::Constant[value=0.1]()\n");
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

TEST(BoolMaskFillIR, SecondWriteMaskedByTheFirstResult) {
  // torchvision's Matcher: two writes, the second's mask computed after the first write (from
  // x's new value, known to keep x's shape), one of them through & of two comparisons.
  auto g = graphWithConstants("%a : Tensor, %b : Tensor", R"IR(
  %x : Tensor = aten::div(%a, %b)
  %lo : Tensor = aten::lt(%x, %half)
  %d1 : int = prim::dtype(%x)
  %v1 : Device = prim::device(%x)
  %t1 : Tensor = aten::tensor(%m1, %d1, %v1, %false)
  %i1 : Tensor?[] = prim::ListConstruct(%lo)
  %w1 : Tensor = aten::index_put_(%x, %i1, %t1, %false)
  %ge : Tensor = aten::ge(%x, %tenth)
  %le : Tensor = aten::le(%x, %half)
  %mid : Tensor = aten::__and__(%ge, %le)
  %d2 : int = prim::dtype(%x)
  %v2 : Device = prim::device(%x)
  %t2 : Tensor = aten::tensor(%two, %d2, %v2, %false)
  %i2 : Tensor?[] = prim::ListConstruct(%mid)
  %w2 : Tensor = aten::index_put_(%x, %i2, %t2, %false)
  return (%x, %w1)
)IR", "  %half : float = prim::Constant[value=0.5]()\n  %tenth : float = prim::Constant[value=0.1]()\n");
  auto ref = g->copy();
  PassRun c = canonicalize(g);
  EXPECT_EQ(c.rewrites(), 2) << c.dump();
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) {
    fc.check_not("aten::index_put_")->check("aten::where(")->check("aten::where(");
  }));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(3)));
  PassRun p = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << p.dump();
  EXPECT_TRUE(sameOutputs(ref, g, inputs(4)));
}

TEST(BoolMaskFillIR, StridesOfATransposedIntermediateAreKept) {
  // x = a.t() / 2 is laid out column-major; index_put_ writes it in place (keeping that layout),
  // and so does where(mask, c, x) over a mask of x's layout (masked_fill would return rows).
  auto g = graphWithConstants("%a : Tensor", R"IR(
  %at : Tensor = aten::t(%a)
  %x : Tensor = aten::div(%at, %two)
  %mask : Tensor = aten::eq(%x, %x)
  %dt : int = prim::dtype(%x)
  %dev : Device = prim::device(%x)
  %c : float = prim::Constant[value=2.5]()
  %val : Tensor = aten::tensor(%c, %dt, %dev, %false)
  %idx : Tensor?[] = prim::ListConstruct(%mask)
  %w : Tensor = aten::index_put_(%x, %idx, %val, %false)
  return (%x)
)IR");
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

TEST(BoolMaskFillIR, NegativeBoolValue) {
  // x = a & b is bool: where(mask, 0, x) would promote it to int64.
  auto g = graphWithConstants("%a : Tensor, %b : Tensor", R"IR(
  %x : Tensor = aten::logical_and(%a, %b)
  %mask : Tensor = aten::logical_not(%x)
  %dt : int = prim::dtype(%x)
  %dev : Device = prim::device(%x)
  %val : Tensor = aten::tensor(%zero, %dt, %dev, %false)
  %idx : Tensor?[] = prim::ListConstruct(%mask)
  %w : Tensor = aten::index_put_(%x, %idx, %val, %false)
  return (%x)
)IR");
  PassRun c = canonicalize(g);
  EXPECT_TRUE(c.rejectedWith("dtype is not known well enough")) << c.dump();
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
  auto g = write("aten::lt(%x, %half)", "int = prim::Constant[value=2]()", "", "%x", "%true");
  PassRun c = canonicalize(g);
  EXPECT_TRUE(c.rejectedWith("accumulate is not a constant False")) << c.dump();
}

TEST(BoolMaskFillIR, NegativeFillValueWhoseConversionIsNotKnown) {
  // 0.1 is not a float: its conversion to x's dtype could round differently on the two paths.
  auto g = write("aten::lt(%x, %half)", "float = prim::Constant[value=0.1]()");
  PassRun c = canonicalize(g);
  EXPECT_TRUE(c.rejectedWith("dtype is not known well enough")) << c.dump();
  // x = a - b may be an integer or unsigned tensor: -1 could convert differently (or overflow).
  auto h = graphWithConstants("%a : Tensor, %b : Tensor", R"IR(
  %x : Tensor = aten::sub(%a, %b, %one)
  %mask : Tensor = aten::ne(%x, %zero)
  %dt : int = prim::dtype(%x)
  %dev : Device = prim::device(%x)
  %val : Tensor = aten::tensor(%m1, %dt, %dev, %false)
  %idx : Tensor?[] = prim::ListConstruct(%mask)
  %w : Tensor = aten::index_put_(%x, %idx, %val, %false)
  return (%x)
)IR");
  PassRun d = canonicalize(h);
  EXPECT_TRUE(d.rejectedWith("dtype is not known well enough")) << d.dump();
}

TEST(BoolMaskFillIR, NegativeGraphInput) {
  auto g = graphWithConstants("%a : Tensor, %b : Tensor", R"IR(
  %mask : Tensor = aten::ne(%a, %a)
  %dt : int = prim::dtype(%a)
  %dev : Device = prim::device(%a)
  %val : Tensor = aten::tensor(%zero, %dt, %dev, %false)
  %idx : Tensor?[] = prim::ListConstruct(%mask)
  %w : Tensor = aten::index_put_(%a, %idx, %val, %false)
  return (%a)
)IR");
  PassRun c = canonicalize(g);
  EXPECT_TRUE(c.rejectedWith("is not a fresh result")) << c.dump();
}

}  // namespace
