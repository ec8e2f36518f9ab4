// IR-string tests of fuse_broadcast_reduce with readers of the reduced value's metadata alone
// (aten::numel, aten::size, aten::dim, prim::dtype; torchvision's Matcher checks
// `iou.numel() == 0` before its max): they read tsfuse::shape_of, so the value is never stored,
// and see the sizes and dtype eager's value has, or the error computing it raises. Readers of its
// shape and dtype that make a tensor (zeros_like, ones_like, full_like) join the region as the
// registry's full_like. A reduction's own value whose metadata alone is read besides its epilogue
// (detectron2's `torch.zeros(1, dtype=inter.dtype)`) is read through tsfuse::shape_of.reduced.
#include "ir_util.h"

#include "passes/fuse_broadcast_reduce.h"
#include "registration/pipeline.h"

namespace ir_metadata_readers_test {

namespace {

using namespace tsfuse_test;

// %v = (%x - %y)^2 over [N, M, D], its metadata read (one reader inside a branch), then its
// minimum over dim 1 with indices.
std::shared_ptr<Graph> minWithMetadataReaders(const std::string& extraUse = "") {
  return graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %s : Tensor = aten::sub(%x, %y, %one)
  %v : Tensor = aten::mul(%s, %s)
  %n : int = aten::numel(%v)
  %sz : int[] = aten::size(%v)
  %rank : int = aten::dim(%v)
  %dt : int = prim::dtype(%v)
  %empty : bool = aten::eq(%n, %zero)
  %rows : int = prim::If(%empty)
    block0():
      %r0 : int = aten::size(%v, %zero)
      -> (%r0)
    block1():
      -> (%m1)
  %vals : Tensor, %idx : Tensor = aten::min(%v, %one, %false)
  return (%vals, %idx, %n, %sz, %rank, %dt, %rows)IR" + extraUse +
                                                            ")\n");
}

std::vector<c10::IValue> points(uint64_t seed, int64_t n, int64_t m, at::ScalarType dtype = at::kFloat) {
  Gen g(seed);
  return {g.tensor({n, 1, 3}, at::kFloat).to(dtype), g.tensor({m, 3}, at::kFloat).to(dtype)};
}

// The message of the error running `g` raises (the interpreter's last line: "RuntimeError: ...",
// after a traceback that names the node that raised), or "".
std::string errorRunning(const std::shared_ptr<Graph>& g, const std::vector<c10::IValue>& in) {
  std::string what = errorOf([&] { runGraph(g, in); });
  while (!what.empty() && (what.back() == '\n' || what.back() == '>')) what.pop_back();
  return what.substr(what.find_last_of('\n') + 1);
}

TEST(MetadataReadersIR, ReadersOfTheReducedValueReadAStandIn) {
  auto g = minWithMetadataReaders();
  auto ref = g->copy();
  PassRun r = runReduce(g);
  EXPECT_EQ(r.rewrites(), 1) << r.dump();
  EXPECT_TRUE(r.events.front().reason.find("5 reader(s) of %") != std::string::npos &&
              r.events.front().reason.find("'s metadata alone read tsfuse::shape_of") != std::string::npos)
      << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("tsfuse::shape_of")->check("aten::numel")->check("aten::size")->check("tsfuse::reduce_with_indices");
    fc.check_not("aten::mul");
  }));
  EXPECT_TRUE(sameOutputs(ref, g, points(1, 7, 9)));
  EXPECT_TRUE(sameOutputs(ref, g, points(2, 1, 1)));
  EXPECT_TRUE(sameOutputs(ref, g, points(3, 4, 5, at::kDouble)));  // dtype follows the operands
}

TEST(MetadataReadersIR, StandInRaisesWhatComputingTheValueRaised) {
  auto g = minWithMetadataReaders();
  auto ref = g->copy();
  runReduce(g);
  // [4, 1, 3] - [5, 2]: the subtraction's broadcast error, before any reader or the min.
  Gen gen(5);
  std::vector<c10::IValue> bad{gen.tensor({4, 1, 3}, at::kFloat), gen.tensor({5, 2}, at::kFloat)};
  const std::string want = errorRunning(ref, bad);
  ASSERT_NE(want.find("must match the size of tensor b"), std::string::npos) << want;
  EXPECT_EQ(errorRunning(g, bad), want);
  // Empty along the reduced dim: the readers see 0 elements, then min raises eager's error.
  std::vector<c10::IValue> empty{gen.tensor({4, 1, 3}, at::kFloat), gen.tensor({0, 3}, at::kFloat)};
  const std::string wantEmpty = errorRunning(ref, empty);
  ASSERT_NE(wantEmpty.find("min"), std::string::npos) << wantEmpty;
  EXPECT_EQ(errorRunning(g, empty), wantEmpty);
}

TEST(MetadataReadersIR, NegativeValueAlsoReadForItsData) {
  auto g = minWithMetadataReaders(", %v");
  PassRun r = runReduce(g);
  EXPECT_EQ(r.rewrites(), 0);
  EXPECT_TRUE(r.rejectedWith("is also used elsewhere, so it is materialised anyway")) << r.dump();
  EXPECT_TRUE(findNodes(g, "tsfuse::shape_of").empty());
}

// detectron2's pairwise IoU: the intersection, a product over the coordinate dim, read by an
// epilogue (inter > 0, inter / (area + area' - inter)) and by the dtype and device of its
// `torch.zeros(1, dtype=inter.dtype, device=inter.device)`; `extraUse` adds a reader.
std::shared_ptr<Graph> intersectionWithItsDtypeRead(const std::string& extraUse = "") {
  return graphWithConstants("%x : Tensor, %y : Tensor, %areas : Tensor", R"IR(
  %lo : Tensor = aten::minimum(%x, %y)
  %w : Tensor = aten::clamp(%lo, %zero, %none)
  %inter : Tensor = aten::prod(%w, %two, %false, %none)
  %pos : Tensor = aten::gt(%inter, %zero)
  %union : Tensor = aten::sub(%areas, %inter, %one)
  %iou : Tensor = aten::div(%inter, %union)
  %dt : int = prim::dtype(%inter)
  %dev : Device = prim::device(%inter)
  %size : int[] = prim::ListConstruct(%one)
  %z : Tensor = aten::zeros(%size, %dt, %none, %dev, %none)
  %out : Tensor = aten::where(%pos, %iou, %z)
  %rank : int = aten::dim(%inter)
  return (%out, %rank)IR" + extraUse + ")\n");
}

std::vector<c10::IValue> boxSides(uint64_t seed, int64_t n, int64_t m, at::ScalarType dtype = at::kFloat) {
  Gen g(seed);
  return {(g.tensor({n, 1, 2}, at::kFloat) * 4).to(dtype), (g.tensor({m, 2}, at::kFloat) * 4).to(dtype),
          (g.tensor({n, m}, at::kFloat) * 8 + 20).to(dtype)};
}

TEST(MetadataReadersIR, EpilogueTakesAReducedValueWhoseMetadataIsRead) {
  auto g = intersectionWithItsDtypeRead();
  auto ref = g->copy();
  PassRun r = runReduce(g);
  ASSERT_EQ(r.rewrites(), 1) << r.dump();
  EXPECT_NE(r.events.front().reason.find("3 reader(s) of the reduced value's metadata alone read tsfuse::shape_of"),
            std::string::npos)
      << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("tsfuse::shape_of")->check("prim::dtype")->check("tsfuse::reduce")->check_not("aten::where");
  }));
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kLong})  // (int64 products: zeros of int64)
    EXPECT_TRUE(sameOutputs(ref, g, boxSides(3, 6, 5, dt))) << dt;
  EXPECT_TRUE(sameOutputs(ref, g, boxSides(4, 0, 5)));
  // The stand-in raises the broadcast error computing the intersection raised.
  Gen gen(6);
  std::vector<c10::IValue> bad{gen.tensor({4, 1, 2}, at::kFloat), gen.tensor({5, 3}, at::kFloat),
                               gen.tensor({4, 5}, at::kFloat)};
  EXPECT_EQ(errorRunning(g, bad), errorRunning(ref, bad));
}

TEST(MetadataReadersIR, NegativeEpilogueStopsAtAReaderOfTheReducedValuesData) {
  auto g = intersectionWithItsDtypeRead(", %inter");
  PassRun r = runReduce(g);
  ASSERT_EQ(r.rewrites(), 1) << r.dump();
  EXPECT_TRUE(findNodes(g, "tsfuse::shape_of").empty());
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("tsfuse::reduce")->check("aten::where"); }));
}

TEST(MetadataReadersIR, ASweptReductionsValueSizeReadsAStandIn) {
  // d = |x - y|^2 summed over the coordinates, then d.sum(1) / d.size(1): the sum is nested into
  // one sweep of d's fused reduction and the size reads tsfuse::shape_of, so d is never stored.
  auto g = graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %s : Tensor = aten::sub(%x, %y, %one)
  %q : Tensor = aten::mul(%s, %s)
  %last : int[] = prim::ListConstruct(%m1)
  %d : Tensor = aten::sum(%q, %last, %false, %none)
  %m : int = aten::size(%d, %one)
  %t : Tensor = aten::sum(%d, %dims1, %false, %none)
  %r : Tensor = aten::div(%t, %m)
  return (%r))IR");
  auto ref = g->copy();
  tsfuse::runPipeline(g, tsfuse::PipelineOptions{}, nullptr, "test");
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 0u) << *g;
  EXPECT_EQ(findNodes(g, "tsfuse::shape_of").size(), 1u) << *g;
  EXPECT_TRUE(sameOutputs(ref, g, points(11, 6, 5)));
  EXPECT_TRUE(sameOutputs(ref, g, points(12, 3, 0)));
}

TEST(MetadataReadersIR, ExpandAsReadsOnlyTheSizesOfItsTarget) {
  // ssd.pytorch's jaccard: the areas expand_as(inter), inter a product over the coordinate pair,
  // then inter / (area_a + area_b - inter). expand_as is expand(inter.size()): inter's sizes read
  // from a stand-in, its value in the reduction's epilogue, never stored.
  auto g = graphWithConstants("%x : Tensor, %y : Tensor, %aa : Tensor, %ab : Tensor", R"IR(
  %lo : Tensor = aten::minimum(%x, %y)
  %w : Tensor = aten::clamp(%lo, %zero, %none)
  %inter : Tensor = aten::prod(%w, %two, %false, %none)
  %ua : Tensor = aten::unsqueeze(%aa, %one)
  %ea : Tensor = aten::expand_as(%ua, %inter)
  %ub : Tensor = aten::unsqueeze(%ab, %zero)
  %eb : Tensor = aten::expand_as(%ub, %inter)
  %s : Tensor = aten::add(%ea, %eb, %one)
  %union : Tensor = aten::sub(%s, %inter, %one)
  %iou : Tensor = aten::div(%inter, %union)
  return (%iou))IR");
  auto ref = g->copy();
  tsfuse::runPipeline(g, tsfuse::PipelineOptions{}, nullptr, "test");
  EXPECT_TRUE(findNodes(g, "aten::expand_as").empty() && findNodes(g, "aten::div").empty()) << *g;
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 1u) << *g;
  Gen gen(13);
  auto in = [&](int64_t a, int64_t b, int64_t areas) {
    return std::vector<c10::IValue>{gen.tensor({a, 1, 2}, at::kFloat) * 4, gen.tensor({b, 2}, at::kFloat) * 4,
                                    gen.tensor({areas}, at::kFloat) + 30, gen.tensor({b}, at::kFloat) + 30};
  };
  EXPECT_TRUE(sameOutputs(ref, g, in(7, 5, 7)));
  EXPECT_TRUE(sameOutputs(ref, g, in(0, 5, 0)));
  const std::vector<c10::IValue> bad = in(7, 5, 6);  // expand's error: 6 areas for 7 boxes
  const std::string want = errorRunning(ref, bad);
  ASSERT_NE(want.find("expanded size"), std::string::npos) << want;
  EXPECT_EQ(errorRunning(g, bad), want);
}

// max(s, 0) spelled with a zeros_like of the broadcast difference, and a ones_like weight: the
// fills are instructions of the one fused op, so neither the difference nor a fill is stored.
std::shared_ptr<Graph> fillsOfTheDifference(const std::string& zerosOptions) {
  return graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %s : Tensor = aten::sub(%x, %y, %one)
  %z : Tensor = aten::zeros_like(%s, )IR" + zerosOptions + R"IR()
  %c : Tensor = aten::gt(%s, %z)
  %p : Tensor = aten::where(%c, %s, %z)
  %w : Tensor = aten::ones_like(%s, %none, %none, %none, %none, %none)
  %f : Tensor = aten::full_like(%s, %two, %none, %none, %none, %none, %none)
  %q : Tensor = aten::mul(%p, %w)
  %r : Tensor = aten::add(%q, %f, %one)
  %t : Tensor = aten::sum(%r, %dims1, %false, %none)
  return (%t))IR");
}

TEST(MetadataReadersIR, FillsOfARegionValueJoinTheRegion) {
  auto g = fillsOfTheDifference("%none, %none, %none, %none, %none");
  auto ref = g->copy();
  PassRun r = runReduce(g);
  ASSERT_EQ(r.rewrites(), 1) << r.dump();
  EXPECT_NE(r.firstRewrite()->expr.find("full_like(%0, 0)"), std::string::npos) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("tsfuse::reduce")
        ->check_not("aten::zeros_like")
        ->check_not("aten::ones_like")
        ->check_not("aten::full_like");
  }));
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kInt})  // (bools: the registry's tests)
    EXPECT_TRUE(sameOutputs(ref, g, points(7, 6, 5, dt), /*exact=*/dt == at::kInt)) << dt;  // float sums: tolerance
  EXPECT_TRUE(sameOutputs(ref, g, points(8, 0, 5)));
}

TEST(MetadataReadersIR, NegativeFillWithAnotherLayoutStaysATen) {
  // memory_format=torch.contiguous_format: the fill's strides need not be the region's.
  auto g = fillsOfTheDifference("%none, %none, %none, %none, %zero");
  auto ref = g->copy();
  PassRun r = runReduce(g);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("aten::zeros_like"); }));
  EXPECT_TRUE(sameOutputs(ref, g, points(9, 6, 5)));
}

}  // namespace

}  // namespace ir_metadata_readers_test
