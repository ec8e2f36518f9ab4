// IR-string tests of native_extrema (passes/native_extrema.h) through the pipeline: max/min(dim)
// with its indices read, and argmax/argmin(dim), that no fused op took become tsfuse::extremum /
// tsfuse::arg_extremum, with eager's results (the fused kernels on a large float tensor, ATen's on
// the rest). Named negative cases: argmax over the flattened tensor (dim None), a max(dim) a fused
// region took.
#include "ir_util.h"

namespace ir_native_extrema_test {

namespace {

using namespace tsfuse_test;

std::vector<c10::IValue> matrices(uint64_t seed) {
  Gen g(seed);
  // [50, 1000] takes the fused kernels, [3, 7] ATen's; rounded: ties.
  return {at::round(g.tensor({50, 1000}, at::kFloat, kNaNInf | kSignedZero)), g.tensor({3, 7}, at::kFloat)};
}

TEST(NativeExtremaIR, AMatchersMaxAndAnArgminOfStoredValues) {
  // torchvision's Matcher: matched_vals, matches = iou.max(dim=0); a k-means assignment's argmin.
  Piped f = pipeline(graphWithConstants("%iou : Tensor, %d : Tensor", R"IR(
  %v : Tensor, %i : Tensor = aten::max(%iou, %zero, %false)
  %a : Tensor = aten::argmin(%d, %one, %true)
  %b : Tensor = aten::argmax(%iou, %m1, %false)
  return (%v, %i, %a, %b)
)IR"));
  EXPECT_EQ(f.r.rewritesBy("native_extrema"), 3) << f.r.dump();
  EXPECT_TRUE(fileCheck(f.r.ir, [](FileCheck& fc) {
    fc.check("tsfuse::extremum(")->check_count("tsfuse::arg_extremum", 2, true)->check_not("aten::arg");
  }));
  for (uint64_t seed : {1, 2}) EXPECT_TRUE(sameOutputs(f.ref, f.g, matrices(seed)));
  Gen g(3);
  EXPECT_TRUE(sameOutputs(f.ref, f.g, {g.tensor({40000}, at::kDouble), g.tensor({70000, 1}, at::kDouble)}));
}

TEST(NativeExtremaIR, NegativeArgmaxOfTheFlattenedTensor) {
  Piped f = pipeline(graphWithConstants("%x : Tensor", R"IR(
  %a : Tensor = aten::argmax(%x, %none, %false)
  return (%a)
)IR"));
  EXPECT_TRUE(f.r.rejectedWith("is not known to be an int (None reduces the flattened tensor)")) << f.r.dump();
  EXPECT_TRUE(fileCheck(f.r.ir, [](FileCheck& fc) { fc.check("aten::argmax")->check_not("tsfuse::"); }));
}

TEST(NativeExtremaIR, NegativeAMaxAFusedRegionTook) {
  Piped f = pipeline(graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %xu : Tensor = aten::unsqueeze(%x, %one)
  %yu : Tensor = aten::unsqueeze(%y, %zero)
  %d : Tensor = aten::sub(%xu, %yu, %one)
  %v : Tensor, %i : Tensor = aten::max(%d, %one, %false)
  return (%v, %i)
)IR"));
  EXPECT_EQ(f.r.rewritesBy("native_extrema"), 0) << f.r.dump();
  EXPECT_TRUE(fileCheck(f.r.ir, [](FileCheck& fc) { fc.check("tsfuse::reduce_with_indices")->check_not("extremum"); }));
  Gen g(4);
  EXPECT_TRUE(sameOutputs(f.ref, f.g, {g.tensor({300}, at::kFloat), g.tensor({200}, at::kFloat)}));
}

}  // namespace

}  // namespace ir_native_extrema_test
