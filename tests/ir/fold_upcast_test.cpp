// IR-string tests of fold_upcast (passes/fold_upcast.cpp): torchvision's _upcast, as scripting
// inlines it, becomes tsfuse::upcast and the box IoU around it one fused op; dtype Ifs that
// decide anything else, or do anything else, are kept, each case named.
#include "ir_util.h"

#include "passes/fold_upcast.h"

#include <torch/csrc/jit/testing/file_check.h>

namespace ir_fold_upcast_test {

namespace {

using namespace tsfuse_test;

// _upcast(t) as torch.jit.script inlines it (torchvision 0.26, ops/_utils.py), over %t.
std::string upcastIf(const std::string& t, const std::string& out, const std::string& floatList = "%f32, %f64",
                     const std::string& extra = "") {
  return "  %isf" + out + " : bool = aten::is_floating_point(" + t + ")\n" + "  %" + out + " : Tensor = prim::If(%isf" +
         out +
         ")\n"
         "    block0():\n"
         "      %d0" +
         out + " : int = prim::dtype(" + t +
         ")\n"
         "      %l0" +
         out + " : int[] = prim::ListConstruct(" + floatList +
         ")\n"
         "      %c0" +
         out + " : bool = aten::__contains__(%l0" + out + ", %d0" + out +
         ")\n"
         "      %r0" +
         out + " : Tensor = prim::If(%c0" + out +
         ")\n"
         "        block0():\n"
         "          -> (" +
         t +
         ")\n"
         "        block1():\n" +
         extra + "          %x0" + out + " : Tensor = aten::to(" + t +
         ", %f32, %false, %false, %none)\n"
         "          -> (%x0" +
         out +
         ")\n"
         "      -> (%r0" +
         out +
         ")\n"
         "    block1():\n"
         "      %d1" +
         out + " : int = prim::dtype(" + t +
         ")\n"
         "      %l1" +
         out +
         " : int[] = prim::ListConstruct(%i32, %i64)\n"
         "      %c1" +
         out + " : bool = aten::__contains__(%l1" + out + ", %d1" + out +
         ")\n"
         "      %r1" +
         out + " : Tensor = prim::If(%c1" + out +
         ")\n"
         "        block0():\n"
         "          -> (" +
         t +
         ")\n"
         "        block1():\n"
         "          %x1" +
         out + " : Tensor = aten::to(" + t +
         ", %i32, %false, %false, %none)\n"
         "          -> (%x1" +
         out +
         ")\n"
         "      -> (%r1" +
         out + ")\n";
}

const std::string kDtypes = R"IR(
  %i32 : int = prim::Constant[value=3]()
  %i64 : int = prim::Constant[value=4]()
  %f32 : int = prim::Constant[value=6]()
  %f64 : int = prim::Constant[value=7]()
  %fzero : float = prim::Constant[value=0.]()
)IR";

// torchvision's box intersection (_box_inter_union) over boxes [N, 4] and [M, 4]:
// inter = _upcast(min(b1[:, None, 2:], b2[:, 2:]) - max(b1[:, None, :2], b2[:, :2])).clamp(min=0),
// then the product of its two columns.
std::shared_ptr<Graph> intersection(const std::string& upcast) {
  return graphWithConstants("%b1 : Tensor, %b2 : Tensor",
                            "  %b1u : Tensor = aten::unsqueeze(%b1, %one)\n"
                            "  %r1 : Tensor = aten::slice(%b1u, %m1, %two, %none, %one)\n"
                            "  %r2 : Tensor = aten::slice(%b2, %m1, %two, %none, %one)\n"
                            "  %l1 : Tensor = aten::slice(%b1u, %m1, %zero, %two, %one)\n"
                            "  %l2 : Tensor = aten::slice(%b2, %m1, %zero, %two, %one)\n"
                            "  %rb : Tensor = aten::minimum(%r1, %r2)\n"
                            "  %lt : Tensor = aten::maximum(%l1, %l2)\n"
                            "  %diff : Tensor = aten::sub(%rb, %lt, %one)\n" +
                                upcast +
                                "  %wh : Tensor = aten::clamp(%up, %fzero, %none)\n"
                                "  %w : Tensor = aten::select(%wh, %m1, %zero)\n"
                                "  %h : Tensor = aten::select(%wh, %m1, %one)\n"
                                "  %inter : Tensor = aten::mul(%w, %h)\n"
                                "  return (%inter)\n",
                            kDtypes, /*named=*/true);
}

std::vector<c10::IValue> boxes(at::ScalarType dt, uint64_t seed) {
  Gen g(seed);
  return {g.tensor({5, 4}, at::kFloat).mul(10).to(dt), g.tensor({7, 4}, at::kFloat).mul(10).to(dt)};
}

TEST(FoldUpcastIR, TorchvisionUpcastBecomesOneOpAndTheIntersectionOneFusedOp) {
  auto g = intersection(upcastIf("%diff", "up"));
  auto ref = g->copy();
  PassRun r = runPass(g, tsfuse::FoldUpcast);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.rewrites(), 1) << r.dump();
  torch::jit::testing::FileCheck().check("tsfuse::upcast(%diff)")->check_not("prim::If")->run(r.ir);
  for (at::ScalarType dt :
       {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kInt, at::kLong, at::kShort, at::kByte})
    EXPECT_TRUE(sameOutputs(ref, g, boxes(dt, 1))) << dt;

  // Through the pipeline, the [N, M, 2] difference is never stored: one pairwise op.
  auto p = intersection(upcastIf("%diff", "up"));
  PassRun all = runPipelineOn(p);
  EXPECT_EQ(findNodes(p, "tsfuse::pairwise").size(), 1u) << all.dump();
  EXPECT_TRUE(findNodes(p, "prim::If").empty()) << all.ir;
  for (at::ScalarType dt : {at::kFloat, at::kHalf, at::kInt}) EXPECT_TRUE(sameOutputs(ref, p, boxes(dt, 2))) << dt;
}

TEST(FoldUpcastIR, AnIfThatKeepsOtherDtypesIsKept) {
  // float16 kept as it is: not _upcast's decision for float16.
  auto g = graphWithConstants("%r1 : Tensor, %l1 : Tensor",
                              "  %diff : Tensor = aten::sub(%r1, %l1, %one)\n" +
                                  upcastIf("%diff", "up", "%f32, %f64, %half") + "  return (%up)\n",
                              kDtypes + "  %half : int = prim::Constant[value=5]()\n", true);
  PassRun r = runPass(g, tsfuse::FoldUpcast);
  EXPECT_FALSE(r.changed);
  EXPECT_TRUE(r.rejectedWith("for Half it gives Half")) << r.dump();
}

TEST(FoldUpcastIR, AnIfWithAnEffectIsKept) {
  auto g = graphWithConstants(
      "%t : Tensor",
      upcastIf("%t", "up", "%f32, %f64", "          %w : Tensor = aten::add_(%t, %one, %one)\n") + "  return (%up)\n",
      kDtypes, true);
  PassRun r = runPass(g, tsfuse::FoldUpcast);
  EXPECT_FALSE(r.changed);
  EXPECT_TRUE(r.rejectedWith("a branch runs aten::add_")) << r.dump();
}

TEST(FoldUpcastIR, AnIfOnAnotherConditionIsNotACandidate) {
  auto g = graphWithConstants("%t : Tensor, %flag : bool", R"IR(
  %up : Tensor = prim::If(%flag)
    block0():
      -> (%t)
    block1():
      %x : Tensor = aten::to(%t, %f32, %false, %false, %none)
      -> (%x)
  return (%up)
)IR",
                              kDtypes, true);
  PassRun r = runPass(g, tsfuse::FoldUpcast);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.rejects(), 0) << r.dump();
}

TEST(FoldUpcastIR, AConditionOnTwoTensorsIsKept) {
  auto g = graphWithConstants("%t : Tensor, %u : Tensor", R"IR(
  %isf : bool = aten::is_floating_point(%u)
  %up : Tensor = prim::If(%isf)
    block0():
      -> (%t)
    block1():
      %x : Tensor = aten::to(%t, %i32, %false, %false, %none)
      -> (%x)
  return (%up)
)IR",
                              kDtypes, true);
  PassRun r = runPass(g, tsfuse::FoldUpcast);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.rejects(), 1) << r.dump();
}

}  // namespace

}  // namespace ir_fold_upcast_test
