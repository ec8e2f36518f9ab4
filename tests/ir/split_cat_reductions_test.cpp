// IR-string tests of split_cat_reductions (passes/split_cat_reductions.h) through the pipeline: a
// min or max over a stack's dim (or a cat of unsqueezed pieces) becomes one pairwise op over the
// pieces, with the same values, dtypes and errors (pieces of other sizes, a dim out of range).
// The min/max are max/min(dim)'s values (an amin/amax of pieces that may carry a gradient is a named
// negative). Named negative cases: the stacked tensor read elsewhere, another dim, a sum, a cat of
// longer pieces, a non-constant dim.
#include "ir_util.h"

namespace ir_split_cat_reductions_test {

namespace {

using namespace tsfuse_test;

// Point-in-box deltas as detection assigners spell them: %x [N, 1] against %g [M, 4] rows.
std::shared_ptr<Graph> deltasThen(const std::string& join, const std::string& tail) {
  return graphWithConstants("%x : Tensor, %y : Tensor, %g : Tensor", R"IR(
  %three : int = prim::Constant[value=3]()
  %g0 : Tensor = aten::select(%g, %one, %zero)
  %g1 : Tensor = aten::select(%g, %one, %one)
  %g2 : Tensor = aten::select(%g, %one, %two)
  %g3 : Tensor = aten::select(%g, %one, %three)
  %l : Tensor = aten::sub(%x, %g0, %one)
  %t : Tensor = aten::sub(%y, %g1, %one)
  %r : Tensor = aten::sub(%g2, %x, %one)
  %b : Tensor = aten::sub(%g3, %y, %one)
)IR" + join + tail,
                            "  %dims2 : int[] = prim::Constant[value=[2]]()\n"
                            "  %dimsm1 : int[] = prim::Constant[value=[-1]]()\n"
                            "  %dims0 : int[] = prim::Constant[value=[0]]()\n",
                            /*named=*/true);
}

const char* kStack2 = R"IR(
  %list : Tensor[] = prim::ListConstruct(%l, %t, %r, %b)
  %s : Tensor = aten::stack(%list, %two)
)IR";

std::vector<c10::IValue> boxes(uint64_t seed, int64_t n, int64_t m, at::ScalarType t = at::kFloat) {
  Gen g(seed);
  return {g.tensor({n, 1}, t, kNaNInf), g.tensor({n, 1}, t, kNaNInf), g.tensor({m, 4}, t, kNaNInf)};
}

TEST(SplitCatReductionsIR, StackMinIsOnePairwiseOp) {
  Piped f = pipeline(deltasThen(kStack2, R"IR(
  %m : Tensor, %mi : Tensor = aten::min(%s, %two, %false)
  %z : float = prim::Constant[value=0.]()
  %inside : Tensor = aten::gt(%m, %z)
  return (%inside, %m)
)IR"));
  ASSERT_EQ(f.r.rewritesBy("split_cat_reductions"), 1) << f.r.dump();
  EXPECT_TRUE(fileCheck(f.r.ir, [](FileCheck& fc) {
    fc.check_not("aten::stack")->check_count("tsfuse::pairwise", 1, true)->check_not("aten::min(");
  }));
  EXPECT_EQ(computingFusedOps(f.g), 1) << f.r.ir;
  for (uint64_t seed : {1, 2, 3}) EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(seed, 37, 11)));
  EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(4, 0, 5)));               // empty
  EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(5, 9, 6, at::kDouble)));  // float64
  EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(6, 9, 6, at::kInt)));     // int32
}

TEST(SplitCatReductionsIR, MaxKeepdimAndNegativeDims) {
  Piped f = pipeline(deltasThen(R"IR(
  %list : Tensor[] = prim::ListConstruct(%l, %t, %r, %b)
  %s : Tensor = aten::stack(%list, %m1)
)IR",
                                R"IR(
  %m : Tensor, %mi : Tensor = aten::max(%s, %m1, %true)
  %e : Tensor = aten::exp(%m)
  return (%e)
)IR"));
  ASSERT_EQ(f.r.rewritesBy("split_cat_reductions"), 1) << f.r.dump();
  EXPECT_TRUE(fileCheck(f.r.ir, [](FileCheck& fc) { fc.check_not("aten::stack")->check_not("aten::max("); }));
  for (uint64_t seed : {7, 8}) EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(seed, 23, 13)));
}

TEST(SplitCatReductionsIR, CatOfUnsqueezedPieces) {
  for (const char* keep : {"%false", "%true"}) {
    Piped f = pipeline(
        deltasThen(R"IR(
  %lu : Tensor = aten::unsqueeze(%l, %m1)
  %tu : Tensor = aten::unsqueeze(%t, %m1)
  %ru : Tensor = aten::unsqueeze(%r, %m1)
  %list : Tensor[] = prim::ListConstruct(%lu, %tu, %ru)
  %s : Tensor = aten::cat(%list, %m1)
)IR",
                   std::string("  %m : Tensor, %mi : Tensor = aten::min(%s, %m1, ") + keep + ")\n  return (%m)\n"));
    ASSERT_EQ(f.r.rewritesBy("split_cat_reductions"), 1) << f.r.dump();
    EXPECT_TRUE(fileCheck(f.r.ir, [](FileCheck& fc) { fc.check_not("aten::cat")->check_not("aten::min("); }));
    for (uint64_t seed : {9, 10}) EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(seed, 17, 5))) << keep;
  }
}

// A view of the result does not move through the pieces' checks (they read the pieces' ranks:
// a select there would put the stack's dim 2 out of range).
TEST(SplitCatReductionsIR, ViewsOfTheResultStopAtThePieces) {
  Piped f = pipeline(graphWithConstants("%x : Float(5, 7, strides=[7, 1], requires_grad=0, device=cpu), %y : Tensor",
                                        R"IR(
  %a : Tensor = aten::sub(%x, %y, %one)
  %b : Tensor = aten::mul(%x, %y)
  %list : Tensor[] = prim::ListConstruct(%a, %b)
  %s : Tensor = aten::stack(%list, %two)
  %m : Tensor, %mi : Tensor = aten::min(%s, %two, %false)
  %v : Tensor = aten::select(%m, %zero, %one)
  %e : Tensor = aten::neg(%v)
  return (%e)
)IR",
                                        "  %dims2 : int[] = prim::Constant[value=[2]]()\n"));
  ASSERT_EQ(f.r.rewritesBy("split_cat_reductions"), 1) << f.r.dump();
  Gen g(13);
  EXPECT_TRUE(sameOutputs(f.ref, f.g, {g.tensor({5, 7}, at::kFloat), g.tensor({7}, at::kFloat)})) << f.r.ir;
}

// A reduction's result is dense; minimum's would follow transposed pieces (strides (1, 5)).
TEST(SplitCatReductionsIR, ResultIsDenseAsAReductionsIs) {
  for (const char* keep : {"%false", "%true"}) {
    Piped f = pipeline(graphWithConstants("%x : Tensor, %y : Tensor", std::string(R"IR(
  %a : Tensor = aten::sub(%x, %y, %one)
  %list : Tensor[] = prim::ListConstruct(%x, %a)
  %s : Tensor = aten::stack(%list, %one)
  %m : Tensor, %mi : Tensor = aten::max(%s, %one, )IR") + keep + R"IR()
  %e : Tensor = aten::neg(%m)
  return (%e)
)IR"));
    ASSERT_EQ(f.r.rewritesBy("split_cat_reductions"), 1) << f.r.dump();
    Gen g(15);
    EXPECT_TRUE(sameOutputs(f.ref, f.g, {g.tensor({7, 5}, at::kFloat).t(), g.tensor({7, 5}, at::kFloat).t()})) << keep;
  }
}

// Pieces of other sizes: stack raises where minimum would broadcast; the same error either way,
// and the same for a dim out of range.
TEST(SplitCatReductionsIR, KeepsTheStacksErrors) {
  Piped f = pipeline(deltasThen(kStack2, "  %m : Tensor, %mi : Tensor = aten::min(%s, %two, %false)\n  return (%m)\n"));
  ASSERT_EQ(f.r.rewritesBy("split_cat_reductions"), 1) << f.r.dump();
  Gen g(11);
  std::vector<c10::IValue> uneven = {g.tensor({6, 1}, at::kFloat), g.tensor({1, 1}, at::kFloat),
                                     g.tensor({4, 4}, at::kFloat)};
  const std::string want = errorOf(f.ref, uneven);
  EXPECT_NE(want.find("stack expects each tensor to be equal size"), std::string::npos) << want;
  EXPECT_EQ(errorOf(f.g, uneven), want);
  // Sizes that do not broadcast: stack's error, not minimum's.
  std::vector<c10::IValue> unbroadcastable = {g.tensor({6, 1}, at::kFloat), g.tensor({3, 1}, at::kFloat),
                                              g.tensor({4, 4}, at::kFloat)};
  const std::string want2 = errorOf(f.ref, unbroadcastable);
  EXPECT_NE(want2.find("stack expects each tensor to be equal size"), std::string::npos) << want2;
  EXPECT_EQ(errorOf(f.g, unbroadcastable), want2);
  // 1-D pieces: stack(dim=2) is out of range for rank 2.
  std::vector<c10::IValue> flat = {g.tensor({6}, at::kFloat), g.tensor({6}, at::kFloat), g.tensor({6, 4}, at::kFloat)};
  Piped f1 = pipeline(graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %list : Tensor[] = prim::ListConstruct(%x, %y)
  %s : Tensor = aten::stack(%list, %two)
  %m : Tensor, %mi : Tensor = aten::min(%s, %two, %false)
  %e : Tensor = aten::neg(%m)
  return (%e)
)IR",
                                         "  %dims2 : int[] = prim::Constant[value=[2]]()\n"));
  ASSERT_EQ(f1.r.rewritesBy("split_cat_reductions"), 1) << f1.r.dump();
  std::vector<c10::IValue> two = {flat[0], flat[1]};
  const std::string range = errorOf(f1.ref, two);
  EXPECT_NE(range.find("Dimension out of range"), std::string::npos) << range;
  EXPECT_EQ(errorOf(f1.g, two), range);
  // Mixed dtypes promote as stack's cat does.
  std::vector<c10::IValue> mixed = {g.tensor({5}, at::kInt), g.tensor({5}, at::kFloat)};
  Piped f2 = pipeline(graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %list : Tensor[] = prim::ListConstruct(%x, %y)
  %s : Tensor = aten::stack(%list, %zero)
  %m : Tensor, %mi : Tensor = aten::max(%s, %zero, %false)
  %e : Tensor = aten::neg(%m)
  return (%e)
)IR",
                                         "  %dims0 : int[] = prim::Constant[value=[0]]()\n"));
  ASSERT_EQ(f2.r.rewritesBy("split_cat_reductions"), 1) << f2.r.dump();
  EXPECT_TRUE(sameOutputs(f2.ref, f2.g, mixed));
  // The error of a cat of pieces of other sizes names the cat's rule.
  Piped f3 = pipeline(deltasThen(R"IR(
  %lu : Tensor = aten::unsqueeze(%l, %m1)
  %tu : Tensor = aten::unsqueeze(%t, %m1)
  %list : Tensor[] = prim::ListConstruct(%lu, %tu)
  %s : Tensor = aten::cat(%list, %m1)
)IR",
                                 "  %m : Tensor, %mi : Tensor = aten::min(%s, %m1, %false)\n  return (%m)\n"));
  ASSERT_EQ(f3.r.rewritesBy("split_cat_reductions"), 1) << f3.r.dump();
  const std::string cat = errorOf(f3.ref, uneven);
  EXPECT_NE(cat.find("Sizes of tensors must match"), std::string::npos) << cat;
  EXPECT_EQ(errorOf(f3.g, uneven), cat);
}

// all/any over a stack of comparisons: logical_and/or of the pieces (bool, as all/any of bools).
TEST(SplitCatReductionsIR, AllAndAnyOfBoolPieces) {
  for (const char* op : {"all", "any"}) {
    Piped f = pipeline(deltasThen(R"IR(
  %z : float = prim::Constant[value=0.]()
  %lp : Tensor = aten::gt(%l, %z)
  %tp : Tensor = aten::gt(%t, %z)
  %rp : Tensor = aten::ge(%r, %z)
  %list : Tensor[] = prim::ListConstruct(%lp, %tp, %rp)
  %s : Tensor = aten::stack(%list, %m1)
)IR",
                                  std::string("  %m : Tensor = aten::") + op + "(%s, %m1, %false)\n  return (%m)\n"));
    ASSERT_EQ(f.r.rewritesBy("split_cat_reductions"), 1) << op << "\n" << f.r.dump();
    EXPECT_EQ(computingFusedOps(f.g), 1) << f.r.ir;
    for (uint64_t seed : {16, 17}) EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(seed, 19, 9))) << op;
  }
  // Pieces of unknown dtype: any of uint8 values is uint8, logical_or's is bool.
  Piped f = pipeline(deltasThen(kStack2, "  %m : Tensor = aten::any(%s, %two, %false)\n  return (%m)\n"));
  EXPECT_EQ(f.r.rewritesBy("split_cat_reductions"), 0) << f.r.dump();
  EXPECT_TRUE(f.r.rejectedWith("is not provably bool")) << f.r.dump();
}

TEST(SplitCatReductionsIR, NegativeCases) {
  struct Case {
    const char* name;
    std::string join, tail, why;
  };
  const std::vector<Case> cases = {
      {"StackedTensorAlsoReturned", kStack2,
       "  %m : Tensor, %mi : Tensor = aten::min(%s, %two, %false)\n  return (%m, %s)\n", "so it is stored anyway"},
      {"ReducedOverAnotherDim", kStack2, "  %m : Tensor, %mi : Tensor = aten::min(%s, %zero, %false)\n  return (%m)\n",
       "so it is stored anyway"},
      {"CatOfLongerPieces", "  %list : Tensor[] = prim::ListConstruct(%l, %t)\n  %s : Tensor = aten::cat(%list, %m1)\n",
       "  %m : Tensor, %mi : Tensor = aten::min(%s, %m1, %false)\n  return (%m)\n", "is not provably of size 1"},
      {"AminOfPiecesThatMayHaveAGradient", kStack2, "  %m : Tensor = aten::amin(%s, %dims2, %false)\n  return (%m)\n",
       "amin/amax's gradient splits among tied pieces"},
      {"DimNotConstant",
       "  %list : Tensor[] = prim::ListConstruct(%l, %t)\n  %k : int = aten::dim(%g)\n"
       "  %s : Tensor = aten::stack(%list, %k)\n",
       "  %m : Tensor, %mi : Tensor = aten::min(%s, %two, %false)\n  return (%m)\n", "its dim is not a constant"},
  };
  for (const Case& c : cases) {
    Piped f = pipeline(deltasThen(c.join, c.tail));
    EXPECT_EQ(f.r.rewritesBy("split_cat_reductions"), 0) << c.name << "\n" << f.r.dump();
    EXPECT_TRUE(f.r.rejectedWith(c.why)) << c.name << "\n" << f.r.dump();
    EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(12, 8, 3))) << c.name;
  }
  // A sum over the stack's dim rounds in eager's order: not this pass's (no candidate at all).
  Piped s = pipeline(deltasThen(kStack2, "  %m : Tensor = aten::sum(%s, %dims2, %false, %none)\n  return (%m)\n"));
  EXPECT_EQ(s.r.rewritesBy("split_cat_reductions"), 0) << s.r.dump();
  EXPECT_TRUE(fileCheck(s.r.ir, [](FileCheck& fc) { fc.check("aten::stack"); }));
}

}  // namespace

}  // namespace ir_split_cat_reductions_test
