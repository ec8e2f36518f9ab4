// count_selected (passes/count_selected.h): a boolean selection read only for its length becomes
// its mask's count, the same int for every input (NaN, empty, 0-dim); the named negative cases
// keep the selection: its values are read, the mask is not provably bool, or not provably of the
// selected tensor's shape (index raises then, and must still raise). count_bool_sums
// (passes/count_bool_sums.h): a stored bool value's sum is its count_nonzero (over dims, the fused
// op's count), the same int64.
#include "ir_util.h"

#include "passes/count_bool_sums.h"
#include "passes/count_selected.h"

namespace ir_count_selected_test {

namespace {

using namespace tsfuse_test;

// graph(%x0, %y): with %x = %x0[..., None] (at least 1-d), the length `reader` reads of x[mask],
// mask computed by `maskOp`.
std::shared_ptr<Graph> lengthOfSelection(const std::string& maskOp, const std::string& reader,
                                         const std::string& result = "%n") {
  std::string body = "  %eps : float = prim::Constant[value=1e-16]()\n";
  body += "  %x : Tensor = aten::unsqueeze(%x0, %m1)\n";
  body += "  %m : Tensor = " + maskOp + "\n";
  body += "  %l : Tensor?[] = prim::ListConstruct(%m)\n  %s : Tensor = aten::index(%x, %l)\n";
  body += "  %n : int = " + reader + "\n  return (" + result + ")\n";
  return graphWithConstants("%x0 : Tensor, %y : Tensor", body, "", /*named=*/true);
}

std::vector<std::vector<c10::IValue>> inputSets() {
  Gen g(5);
  std::vector<std::vector<c10::IValue>> out;
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{6, 5, 4}, {0, 3}, {}, {17}}) {
    out.push_back({g.tensor(shape, at::kFloat, kNaNInf), g.tensor(shape, at::kFloat)});
    out.push_back({g.tensor(shape, at::kDouble, kSignedZero), g.tensor(shape, at::kDouble)});
  }
  return out;
}

TEST(CountSelectedIR, ALengthOfAMaskedSelectionIsTheMasksCount) {
  for (const char* reader : {"aten::size(%s, %zero)", "aten::size(%s, %m1)", "aten::numel(%s)", "aten::len(%s)"}) {
    auto original = lengthOfSelection("aten::gt(%x, %eps)", reader);
    auto g = original->copy();
    PassRun r = runPass(g, tsfuse::CountSelected);
    ASSERT_TRUE(r.changed) << reader << "\n" << r.dump();
    EXPECT_EQ(r.rewritesBy("count_selected"), 1) << r.dump();
    EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
      fc.check_not("aten::index")->check("aten::sum(%m")->check("aten::Int")->check_not("aten::size");
    })) << reader;
    for (const auto& in : inputSets()) EXPECT_TRUE(sameOutputs(original, g, in)) << reader;
  }
}

TEST(CountSelectedIR, ALogicalMaskOfComparisonsCounts) {
  // (x > eps) & ~(x != x): a mask of the selected tensor's own comparisons.
  auto g = graphWithConstants("%x0 : Tensor", R"IR(
  %eps : float = prim::Constant[value=0.5]()
  %x : Tensor = aten::unsqueeze(%x0, %zero)
  %a : Tensor = aten::gt(%x, %eps)
  %b : Tensor = aten::ne(%x, %x)
  %c : Tensor = aten::bitwise_not(%b)
  %m : Tensor = aten::__and__(%a, %c)
  %l : Tensor?[] = prim::ListConstruct(%m)
  %s : Tensor = aten::index(%x, %l)
  %n : int = aten::size(%s, %zero)
  return (%n)
)IR");
  auto original = g->copy();
  EXPECT_TRUE(runPass(g, tsfuse::CountSelected).changed);
  Gen gen(9);
  EXPECT_TRUE(sameOutputs(original, g, {gen.tensor({40, 30}, at::kFloat, kNaNInf)}));
}

TEST(CountSelectedIR, SelectionsReadOrMasksNotProvenAreKept) {
  // The selected values are read: no candidate, nothing reported.
  auto read = lengthOfSelection("aten::gt(%x, %eps)", "aten::size(%s, %zero)", "%n, %s");
  PassRun r = runPass(read, tsfuse::CountSelected);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.rejects(), 0) << r.dump();
  // The size of another dim than the selection's one.
  auto other = lengthOfSelection("aten::gt(%x, %eps)", "aten::size(%s, %one)");
  EXPECT_FALSE(runPass(other, tsfuse::CountSelected).changed);
  // A mask of another tensor: x[m] raises for another shape, and still does.
  auto foreign = lengthOfSelection("aten::gt(%y, %eps)", "aten::size(%s, %zero)");
  r = runPass(foreign, tsfuse::CountSelected);
  EXPECT_FALSE(r.changed);
  EXPECT_TRUE(r.rejectedWith("not provably of x's shape")) << r.dump();
  Gen g(2);
  EXPECT_NE(errorOf(foreign, {g.tensor({4, 3}, at::kFloat), g.tensor({4, 2}, at::kFloat)}), "");
  // A selected tensor that may be 0-dim: index raises for it, and still does.
  auto scalar = graphWithConstants("%x : Tensor", R"IR(
  %m : Tensor = aten::ne(%x, %x)
  %l : Tensor?[] = prim::ListConstruct(%m)
  %s : Tensor = aten::index(%x, %l)
  %n : int = aten::numel(%s)
  return (%n)
)IR");
  r = runPass(scalar, tsfuse::CountSelected);
  EXPECT_FALSE(r.changed);
  EXPECT_TRUE(r.rejectedWith("x may be 0-dim")) << r.dump();
  EXPECT_NE(errorOf(scalar, {g.tensor({}, at::kFloat)}), "");
  // A mask that may not be bool (an integer index tensor gathers rows).
  auto ints = lengthOfSelection("aten::abs(%y)", "aten::size(%s, %zero)");
  r = runPass(ints, tsfuse::CountSelected);
  EXPECT_FALSE(r.changed);
  EXPECT_TRUE(r.rejectedWith("not provably a bool tensor")) << r.dump();
}

TEST(CountSelectedIR, TripletCountsFuseAndTheSelectionIsNeverMade) {
  // online-triplet-loss's batch_all: the positive triplets counted as loss[loss > 1e-16].size(0)
  // beside the loss's sum; no aten::index is left, the count is a reduction of the mask.
  auto g = graphWithConstants("%d : Tensor", R"IR(
  %eps : float = prim::Constant[value=1e-16]()
  %margin : float = prim::Constant[value=0.2]()
  %a : Tensor = aten::unsqueeze(%d, %two)
  %b : Tensor = aten::unsqueeze(%d, %one)
  %t : Tensor = aten::sub(%a, %b, %one)
  %u : Tensor = aten::add(%t, %margin, %one)
  %loss : Tensor = aten::relu(%u)
  %m : Tensor = aten::gt(%loss, %eps)
  %l : Tensor?[] = prim::ListConstruct(%m)
  %s : Tensor = aten::index(%loss, %l)
  %n : int = aten::size(%s, %zero)
  %total : Tensor = aten::sum(%loss, %none)
  return (%n, %total)
)IR");
  auto original = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("aten::index")->check("tsfuse::"); })) << r.ir;
  Gen gen(4);
  EXPECT_TRUE(sameOutputs(original, g, {gen.tensor({24, 24}, at::kFloat)}, /*exact=*/false));
}

// graph(%x, %y): %n = aten::sum(%m, <sumArgs>) of the mask %m = (x > y) & (x != 0), which a where
// reads too (stored), and that where.
std::shared_ptr<Graph> sumOfAStoredMask(const std::string& sumArgs) {
  return graphWithConstants("%x : Tensor, %y : Tensor",
                            "  %a : Tensor = aten::gt(%x, %y)\n"
                            "  %b : Tensor = aten::ne(%x, %zero)\n"
                            "  %m : Tensor = aten::__and__(%a, %b)\n"
                            "  %n : Tensor = aten::sum(%m, " +
                                sumArgs +
                                ")\n"
                                "  %f : Tensor = aten::where(%m, %x, %y)\n"
                                "  return (%n, %f)\n",
                            "  %empty : int[] = prim::ListConstruct()\n"
                            "  %dimsm1 : int[] = prim::Constant[value=[-1]]()\n");
}

TEST(CountBoolSumsIR, AStoredMasksSumIsItsCount) {
  // batch_all's num_valid_triplets = mask.sum(), the mask stored for the loss's region too.
  auto g = sumOfAStoredMask("%none");
  auto original = g->copy();
  PassRun r = runPass(g, tsfuse::CountBoolSums);
  ASSERT_TRUE(r.changed) << r.dump();
  EXPECT_EQ(r.rewritesBy("count_bool_sums"), 1);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("aten::count_nonzero")->check_not("aten::sum"); }));
  Gen gen(6);
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{9, 8, 7}, {0, 4}, {}})
    EXPECT_TRUE(sameOutputs(original, g, {gen.tensor(shape, at::kFloat, kNaNInf), gen.tensor(shape, at::kFloat)}));
}

TEST(CountBoolSumsIR, AStoredMasksSumOverDimsIsTheFusedCount) {
  // Semi-hard triplet mining: `(mask & (d > t)).sum(1, keepdim=True) > 0`, the mask stored for the
  // masked minimum too. Counted in place by the fused op: the same int64 values, shapes and errors
  // (dim 1 of a 1-d operand raises eager's error; an empty dim list sums every dim).
  for (const char* dims : {"%dims1", "%dimsm1", "%empty"}) {
    for (const char* keepdim : {"%true", "%false"}) {
      auto g = sumOfAStoredMask(std::string(dims) + ", " + keepdim + ", %none");
      auto original = g->copy();
      PassRun r = runPass(g, tsfuse::CountBoolSums);
      ASSERT_TRUE(r.changed) << r.dump();
      EXPECT_EQ(r.rewritesBy("count_bool_sums"), 1);
      EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("tsfuse::reduce")->check_not("aten::sum"); }));
      Gen gen(7);
      for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{9, 37}, {300, 130}, {0, 4}, {5}}) {
        const std::vector<c10::IValue> in = {gen.tensor(shape, at::kFloat, kNaNInf), gen.tensor(shape, at::kFloat)};
        const std::string error = errorOf(original, in);
        EXPECT_EQ(errorOf(g, in), error) << dims << " " << c10::IntArrayRef(shape);
        if (error.empty())
          EXPECT_TRUE(sameOutputs(original, g, in)) << dims << " " << keepdim << " " << c10::IntArrayRef(shape);
        else
          EXPECT_TRUE(shape.size() == 1 && std::string(dims) == "%dims1") << error;  // (the one that raises)
      }
    }
  }
}

// (%c: a mask of one tensor's shape, ultralytics' keypoint mask.sum(-1): no broadcast, kept)
TEST(CountBoolSumsIR, SumsOfValuesNotProvablyBoolOrWithADtypeAreKept) {
  auto g = graphWithConstants("%x : Tensor", R"IR(
  %a : Tensor = aten::gt(%x, %zero)
  %long : int = prim::Constant[value=4]()
  %n : Tensor = aten::sum(%a, %long)
  %s : Tensor = aten::sum(%x, %none)
  %k : Tensor = aten::sum(%a, %dims1, %true, %long)
  %t : Tensor = aten::sum(%x, %dims1, %true, %none)
  %c : Tensor = aten::sum(%a, %dims1, %true, %none)
  return (%n, %s, %k, %t, %c)
)IR");
  EXPECT_FALSE(runPass(g, tsfuse::CountBoolSums).changed);
}

}  // namespace

}  // namespace ir_count_selected_test
