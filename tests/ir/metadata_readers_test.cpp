// IR-string tests of fuse_broadcast_reduce with readers of the reduced value's metadata alone
// (aten::numel, aten::size, aten::dim, prim::dtype; torchvision's Matcher checks
// `iou.numel() == 0` before its max): they read tsfuse::shape_of, so the value is never stored,
// and see the sizes and dtype eager's value has, or the error computing it raises.
#include "ir_util.h"

#include "passes/fuse_broadcast_reduce.h"

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

}  // namespace

}  // namespace ir_metadata_readers_test
