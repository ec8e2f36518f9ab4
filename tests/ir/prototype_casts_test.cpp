// IR-string tests of casts whose target type is known only at run time (prototype_casts): scripted
// x.to(y), x.type_as(y), x.type(y.type()) and x.to(y.dtype) of a fusible value become a cast to a
// 0-dim prototype of y's type (the registry's to_other) that fuses; what the type came from is
// read for its metadata alone, which fuse_pairwise serves from tsfuse::shape_of, so a
// broadcast value the fused ops recompute is never computed for it. Named negatives: a cast of
// no fusible value is left as written.
#include "ir_util.h"

#include "passes/prototype_casts.h"

namespace ir_prototype_casts_test {

namespace {

using namespace tsfuse_test;

// %d = a[:, None] - b[None] read by two row sums, one of them of the mask d > 0 cast by `cast`
// (an IR line defining %c from %m).
std::shared_ptr<Graph> maskCastThen(const std::string& cast) {
  return graphWithConstants("%a : Tensor, %b : Tensor, %y : Tensor", R"IR(
  %au : Tensor = aten::unsqueeze(%a, %one)
  %bu : Tensor = aten::unsqueeze(%b, %zero)
  %d : Tensor = aten::sub(%au, %bu, %one)
  %m : Tensor = aten::gt(%d, %zero)
  )IR" + cast + R"IR(
  %s : Tensor = aten::sum(%c, %dims1, %false, %none)
  %dd : Tensor = aten::mul(%d, %d)
  %s2 : Tensor = aten::sum(%dd, %dims1, %false, %none)
  return (%s, %s2)
)IR");
}

bool anyRewriteSays(const PassRun& r, const std::string& text) {
  for (const auto& e : r.events)
    if (e.kind == tsfuse::FusionEvent::Kind::Rewrite && e.reason.find(text) != std::string::npos) return true;
  return false;
}

std::vector<c10::IValue> inputs(uint64_t seed, at::ScalarType y) {
  Gen g(seed);
  return {g.tensor({7}, at::kFloat, kNaNInf), g.tensor({9}, at::kFloat, kNaNInf), g.tensor({2}, at::kFloat).to(y)};
}

void expectFusedCast(const std::string& cast) {
  auto g = maskCastThen(cast);
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 2u) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check_not("aten::sub")->check_not("aten::gt")->check("to_other(");
  })) << r.ir;
  for (at::ScalarType y : {at::kFloat, at::kDouble, at::kInt, at::kBool})
    EXPECT_TRUE(sameOutputs(ref, g, inputs(3, y))) << y;
}

TEST(PrototypeCastsIR, ToAnotherTensorFuses) {
  expectFusedCast("%c : Tensor = aten::to(%m, %y, %false, %false, %none)");
}

TEST(PrototypeCastsIR, TypeAsFuses) { expectFusedCast("%c : Tensor = aten::type_as(%m, %y)"); }

TEST(PrototypeCastsIR, ToARunTimeDtypeFuses) {
  expectFusedCast("%dt : int = prim::dtype(%y)\n  %c : Tensor = aten::to(%m, %dt, %false, %false, %none)");
}

// Scripted x.type(d.type()) with d the broadcast difference: to(m, to(d)), the inner to() d
// itself. d's type comes from a stand-in: d is recomputed by both sums and never computed.
TEST(PrototypeCastsIR, TheTypeOfAFusedAwayValueIsReadFromAStandIn) {
  auto g = maskCastThen(
      "%td : Tensor = aten::to(%d, %none, %none, %none, %none, %false, %false, %none)\n"
      "  %c : Tensor = aten::to(%m, %td, %false, %false, %none)");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 2u) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("tsfuse::shape_of")->check_not("aten::sub")->check("to_other(");
  })) << r.ir;
  EXPECT_TRUE(anyRewriteSays(r, "'s metadata alone read tsfuse::shape_of")) << r.dump();
  EXPECT_TRUE(sameOutputs(ref, g, inputs(4, at::kFloat)));
}

// A cast ending a region (the mask cast for a matmul, fast_pytorch_kmeans' (c == k).to(X.dtype))
// joins it where it casts a value of the region that nothing else reads: no bool intermediate.
TEST(PrototypeCastsIR, ACastEndingARegionJoinsItWhereItAloneReadsTheValue) {
  auto g = graphWithConstants("%a : Tensor, %b : Tensor, %y : Tensor", R"IR(
  %au : Tensor = aten::unsqueeze(%a, %one)
  %bu : Tensor = aten::unsqueeze(%b, %zero)
  %m : Tensor = aten::eq(%au, %bu)
  %dt : int = prim::dtype(%y)
  %c : Tensor = aten::to(%m, %dt, %false, %false, %none)
  %r : Tensor = aten::matmul(%c, %y)
  return (%r)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("aten::eq")->check("to_other("); })) << r.ir;
  Gen gen(5);
  std::vector<c10::IValue> in = {gen.tensor({6}, at::kFloat).round(), gen.tensor({4}, at::kFloat).round(),
                                 gen.tensor({4, 3}, at::kFloat)};
  EXPECT_TRUE(sameOutputs(ref, g, in));
}

// The cast's input read elsewhere too: eager's to() may return that very tensor, so it stays.
TEST(PrototypeCastsIR, NegativeACastOfASharedValueEndsNoRegion) {
  auto g = graphWithConstants("%a : Tensor, %b : Tensor", R"IR(
  %au : Tensor = aten::unsqueeze(%a, %one)
  %bu : Tensor = aten::unsqueeze(%b, %zero)
  %d : Tensor = aten::sub(%au, %bu, %one)
  %m : Tensor = aten::abs(%d)
  %f : int = prim::Constant[value=6]()
  %c : Tensor = aten::to(%m, %f, %false, %false, %none)
  return (%c, %m)
)IR");
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "aten::to").size(), 1u) << r.dump();
}

TEST(PrototypeCastsIR, NegativeACastOfNoFusibleValueIsLeft) {
  auto g = graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %c : Tensor = aten::to(%x, %y, %false, %false, %none)
  return (%c)
)IR");
  PassRun r = runPass(g, tsfuse::PrototypeCasts);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_TRUE(findNodes(g, "aten::empty").empty());
}

// type_as of a value no region computes is spelled x.to(y) (no prototype): where y has x's dtype
// it returns x itself, and to()'s schema says so. A fused reader of the cast must then not move
// past an in-place write to x through another view (the fuzzer's program: floor of the cast, then
// neg_ of it, fused after the clamp_ of x's reshape, read the clamped values).
TEST(PrototypeCastsIR, TypeAsOfAViewSeesWritesToWhatItViews) {
  const std::string body = R"IR(
  %shape : int[] = prim::Constant[value=[8, -1]]()
  %x8 : Tensor = aten::reshape(%x, %shape)
  %end : int = prim::Constant[value=9223372036854775807]()
  %xs : Tensor = aten::slice(%x, %zero, %one, %end, %one)
  %t : Tensor = aten::type_as(%xs, %y)
  %f : Tensor = aten::floor(%t)
  %c : Tensor = aten::clamp_(%x8, %zero, %none)
  %n : Tensor = aten::neg_(%f)
  return (%n)
)IR";
  auto g = graphWithConstants("%x : Tensor, %y : Tensor", body);
  PassRun r = runPass(g, tsfuse::PrototypeCasts);
  EXPECT_TRUE(r.changed) << r.dump();
  EXPECT_TRUE(findNodes(g, "aten::type_as").empty() && findNodes(g, "aten::empty").empty()) << r.ir;
  auto whole = graphWithConstants("%x : Tensor, %y : Tensor", body);
  auto ref = whole->copy();
  runPipelineOn(whole);
  for (at::ScalarType t : {at::kLong, at::kFloat}) {
    auto in = [&] {
      return std::vector<c10::IValue>{at::arange(-72, 72, at::TensorOptions(t)).view({8, 9, 2}),
                                      at::zeros({1}, at::TensorOptions(at::kLong))};
    };
    EXPECT_TRUE(sameOutputs(ref, whole, in())) << t;
  }
}

}  // namespace
}  // namespace ir_prototype_casts_test
