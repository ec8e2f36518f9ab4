// IR-string tests of sink_views (views of elementwise intermediates pushed to the leaves) and of
// its runtime helpers tsfuse::broadcast_{select,slice,unsqueeze,squeeze}; plus several reductions of one
// broadcast value (Chamfer), each fused on its own.
#include "ir_util.h"

#include "kernels/reference/aten_eval.h"
#include "passes/sink_views.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <functional>
#include <regex>

namespace ir_sink_views_test {

namespace {

using namespace tsfuse_test;

// torchvision's _box_inter_union + box_iou, as scripted (after inlining; full slices kept).
const char* kBoxIou = R"IR(
graph(%a : Tensor, %b : Tensor):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %three : int = prim::Constant[value=3]()
  %a2 : Tensor = aten::select(%a, %one, %two)
  %a0 : Tensor = aten::select(%a, %one, %zero)
  %a3 : Tensor = aten::select(%a, %one, %three)
  %a1 : Tensor = aten::select(%a, %one, %one)
  %aw : Tensor = aten::sub(%a2, %a0, %one)
  %ah : Tensor = aten::sub(%a3, %a1, %one)
  %area1 : Tensor = aten::mul(%aw, %ah)
  %b2 : Tensor = aten::select(%b, %one, %two)
  %b0 : Tensor = aten::select(%b, %one, %zero)
  %b3 : Tensor = aten::select(%b, %one, %three)
  %b1 : Tensor = aten::select(%b, %one, %one)
  %bw : Tensor = aten::sub(%b2, %b0, %one)
  %bh : Tensor = aten::sub(%b3, %b1, %one)
  %area2 : Tensor = aten::mul(%bw, %bh)
  %au : Tensor = aten::unsqueeze(%a, %one)
  %alo : Tensor = aten::slice(%au, %two, %none, %two, %one)
  %blo : Tensor = aten::slice(%b, %one, %none, %two, %one)
  %lt : Tensor = aten::max(%alo, %blo)
  %ahi : Tensor = aten::slice(%au, %two, %two, %none, %one)
  %bhi : Tensor = aten::slice(%b, %one, %two, %none, %one)
  %rb : Tensor = aten::min(%ahi, %bhi)
  %d : Tensor = aten::sub(%rb, %lt, %one)
  %wh : Tensor = aten::clamp(%d, %zero, %none)
  %w0 : Tensor = aten::slice(%wh, %zero, %none, %none, %one)
  %w1 : Tensor = aten::slice(%w0, %one, %none, %none, %one)
  %w : Tensor = aten::select(%w1, %two, %zero)
  %h0 : Tensor = aten::slice(%wh, %zero, %none, %none, %one)
  %h1 : Tensor = aten::slice(%h0, %one, %none, %none, %one)
  %h : Tensor = aten::select(%h1, %two, %one)
  %inter : Tensor = aten::mul(%w, %h)
  %a1u : Tensor = aten::unsqueeze(%area1, %one)
  %sum : Tensor = aten::add(%a1u, %area2, %one)
  %union : Tensor = aten::sub(%sum, %inter, %one)
  %iou : Tensor = aten::div(%inter, %union)
  return (%iou)
)IR";

at::Tensor boxes(int64_t n, uint64_t seed, at::ScalarType t = at::kFloat) {
  Gen g(seed);
  at::Tensor xy = g.tensor({n, 2}, at::kDouble).abs() * 30;
  at::Tensor wh = g.tensor({n, 2}, at::kDouble).abs() * 10 + 0.5;
  return at::cat({xy, xy + wh}, 1).to(t);
}

TEST(SinkViewsIR, TorchvisionBoxIouBecomesOnePairwise) {
  auto g = parseGraph(kBoxIou);
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  // No [N,M,2] producer (min/max/clamp on the full boxes) nor the area subexpressions remain.
  EXPECT_TRUE(fileCheck(
      r.ir, [](FileCheck& fc) { fc.check_not("aten::clamp")->check_not("aten::mul(")->check_not("aten::div"); }));
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_count("tsfuse::broadcast_select", 2, true); }));
  // Each carries the sunk intermediate's expression over its leaves: lt, rb, rb - lt, clamp.
  for (torch::jit::Node* n : findNodes(g, "tsfuse::broadcast_select"))
    EXPECT_EQ(torch::jit::toIValue(n->input(3))->toStringRef(),
              "v1: maximum($0, $1); minimum($2, $3); sub(%1, %0); clamp(%2, 0, None)");
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{7, 5}, {1, 4}, {3, 1}, {0, 3}, {1, 1}})
    for (auto t : {at::kFloat, at::kDouble, at::kLong}) {
      SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(m));
      EXPECT_TRUE(sameOutputs(ref, g, {boxes(n, 1, t), boxes(m, 2, t)}));
    }
}

// ultralytics' matcher cost: 1 - bbox_iou(pred.unsqueeze(2), gt.unsqueeze(1)).squeeze(-1), the
// IoU a [B, Q, T, 1] value; the squeeze moves to the leaves, so the IoU and 1 - x are one op. Where
// the last dim is not 1 the squeeze leaves the value as it is (checked at run time).
TEST(SinkViewsIR, SqueezeOfAnIntermediateIsSunkAndTheTailFuses) {
  auto g = parseGraph(R"IR(
graph(%p : Tensor, %t : Tensor):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %m1 : int = prim::Constant[value=-1]()
  %pu : Tensor = aten::unsqueeze(%p, %two)
  %tu : Tensor = aten::unsqueeze(%t, %one)
  %lo : Tensor = aten::maximum(%pu, %tu)
  %d : Tensor = aten::sub(%pu, %lo, %one)
  %c : Tensor = aten::clamp(%d, %zero, %none)
  %s : Tensor = aten::squeeze(%c, %m1)
  %r : Tensor = aten::rsub(%s, %one, %one)
  return (%r)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  EXPECT_EQ(findNodes(g, "tsfuse::broadcast_squeeze").size(), 1u) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("aten::squeeze")->check_not("aten::rsub"); }));
  Gen gen(9);
  for (auto [q, k] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 4}, {3, 1}, {0, 1}}) {
    SCOPED_TRACE(std::to_string(q) + " " + std::to_string(k));
    EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({2, 5, q}, at::kFloat), gen.tensor({2, 3, k}, at::kFloat)}));
    EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({2, 5, q}, at::kDouble), gen.tensor({2, 3, k}, at::kFloat)}));
  }
}

TEST(SinkViewsIR, SqueezeOfUnknownRankIsRejected) {
  // %d may be 1-D [1]: squeezing it would make a 0-dim value (type promotion).
  auto g = parseGraph(R"IR(
graph(%a : Tensor, %b : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %d : Tensor = aten::sub(%a, %b, %one)
  %x : Tensor = aten::squeeze(%d, %zero)
  %m : Tensor = aten::mul(%x, %b)
  return (%m)
)IR");
  PassRun r = runPass(g, tsfuse::SinkViews);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_TRUE(r.rejectedWith("has rank >= 2 (squeezing a 1-D value")) << r.dump();
}

TEST(SinkViewsIR, SelectOfUnknownRankIsRejected) {
  // %d may be 1-D: selecting dim 0 could turn leaves into 0-dim tensors (type promotion).
  auto g = parseGraph(R"IR(
graph(%a : Tensor, %b : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %d : Tensor = aten::sub(%a, %b, %one)
  %x : Tensor = aten::select(%d, %zero, %zero)
  %y : Tensor = aten::select(%d, %zero, %one)
  %m : Tensor = aten::mul(%x, %y)
  return (%m)
)IR");
  auto ref = g->copy();
  PassRun r = runPass(g, tsfuse::SinkViews);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_TRUE(r.rejectedWith("has rank >= 2 (selecting from a 1-D value")) << r.dump();
  Gen gen(3);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({4, 3}, at::kFloat), gen.tensor({3}, at::kDouble)}));
}

TEST(SinkViewsIR, IntermediateAlsoUsedElsewhereIsNotSunk) {
  auto g = parseGraph(R"IR(
graph(%a : Tensor, %b : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %au : Tensor = aten::unsqueeze(%a, %one)
  %d : Tensor = aten::sub(%au, %b, %one)
  %x : Tensor = aten::select(%d, %two, %zero)
  %m : Tensor = aten::mul(%x, %x)
  return (%m, %d)
)IR");
  PassRun r = runPass(g, tsfuse::SinkViews);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_TRUE(r.rejectedWith("materialised anyway")) << r.dump();
}

TEST(SinkViewsIR, ViewReadByANonElementwiseOpIsNotSunk) {
  auto g = parseGraph(R"IR(
graph(%a : Tensor, %b : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %au : Tensor = aten::unsqueeze(%a, %one)
  %d : Tensor = aten::sub(%au, %b, %one)
  %x : Tensor = aten::select(%d, %two, %zero)
  %m : Tensor = aten::matmul(%x, %x)
  return (%m)
)IR");
  PassRun r = runPass(g, tsfuse::SinkViews);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_TRUE(r.rejectedWith("may observe its layout or identity")) << r.dump();
}

// Fuzzer seed 23, program 1074: out = (v < x1)[:, -1][None, :]. Sinking the select would return
// a dense [1, N] where eager returns a strided view of the comparison (strides (3N, 3), not
// contiguous): a view chain is only sunk when every view in it is read elementwise.
TEST(SinkViewsIR, ViewChainReturnedAsOutputIsNotSunk) {
  const char* ir = R"IR(
graph(%a : Tensor, %b : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %m1 : int = prim::Constant[value=-1]()
  %d : Tensor = aten::lt(%a, %b)
  %x : Tensor = aten::select(%d, %one, %m1)
  %y : Tensor = aten::unsqueeze(%x, %zero)
  %z : Tensor = aten::mul(%y, %one)
  return (%RET)
)IR";
  auto returned = parseGraph(std::regex_replace(ir, std::regex("%RET"), "%y"));
  auto ref = returned->copy();
  PassRun r = runPass(returned, tsfuse::SinkViews);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_TRUE(r.rejectedWith("a view of it is used by prim::Return")) << r.dump();
  Gen gen(7);
  std::vector<c10::IValue> in = {gen.tensor({6, 3}, at::kInt), gen.tensor({1, 3}, at::kInt)};
  EXPECT_TRUE(sameOutputs(ref, returned, in));
  // Read elementwise at the end of the chain, the layout is not observable: sunk.
  auto read = parseGraph(std::regex_replace(ir, std::regex("%RET"), "%z"));
  EXPECT_TRUE(runPass(read, tsfuse::SinkViews).changed);
}

TEST(SinkViewsIR, LeafWrittenBetweenTheIntermediateAndItsViewIsNotSunk) {
  // The copy of sub would read %b at the select, after the add_; the original read it before.
  auto g = parseGraph(R"IR(
graph(%a : Tensor, %b : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %au : Tensor = aten::unsqueeze(%a, %one)
  %d : Tensor = aten::sub(%au, %b, %one)
  %w : Tensor = aten::add_(%b, %one, %one)
  %x : Tensor = aten::select(%d, %two, %zero)
  %m : Tensor = aten::mul(%x, %two)
  return (%m)
)IR");
  auto ref = g->copy();
  PassRun r = runPass(g, tsfuse::SinkViews);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_TRUE(r.rejectedWith("is written by an in-place op (aten::add_")) << r.dump();
  Gen gen(4);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({4, 3}, at::kFloat), gen.tensor({5, 3}, at::kFloat)}));
}

TEST(SinkViewsIR, SliceThenSelectAndUnsqueezeOfIntermediates) {
  // diff = x[:, None, :] - y; d = diff[..., :2][..., 1] ** 2; out = d + (x0 * 2)[:, None]
  auto g = parseGraph(R"IR(
graph(%x : Tensor, %y : Tensor):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %m1 : int = prim::Constant[value=-1]()
  %xu : Tensor = aten::unsqueeze(%x, %one)
  %diff : Tensor = aten::sub(%xu, %y, %one)
  %s : Tensor = aten::slice(%diff, %m1, %none, %two, %one)
  %c : Tensor = aten::select(%s, %m1, %one)
  %sq : Tensor = aten::pow(%c, %two)
  %x0 : Tensor = aten::select(%x, %one, %zero)
  %x2 : Tensor = aten::mul(%x0, %two)
  %x2u : Tensor = aten::unsqueeze(%x2, %one)
  %out : Tensor = aten::add(%sq, %x2u, %one)
  return (%out)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("tsfuse::broadcast_slice")->check("tsfuse::broadcast_select")->check_not("aten::sub");
  }));
  Gen gen(5);
  for (auto [n, m, d] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{5, 4, 3}, {1, 4, 2}, {3, 1, 2}, {0, 2, 3}}) {
    EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({n, d}, at::kFloat), gen.tensor({m, d}, at::kFloat)}));
    // y broadcast along the feature dim (size 1): the leaf keeps its size-1 dim / selects index 0.
    EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({n, 3}, at::kFloat), gen.tensor({m, 1}, at::kDouble)}));
  }
}

TEST(SinkViewsIR, ChamferMinAlongEachDimFusesTwice) {
  auto g = parseGraph(R"IR(
graph(%x : Tensor, %y : Tensor):
  %false : bool = prim::Constant[value=0]()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %m1 : int = prim::Constant[value=-1]()
  %none : NoneType = prim::Constant()
  %xu : Tensor = aten::unsqueeze(%x, %one)
  %yu : Tensor = aten::unsqueeze(%y, %zero)
  %diff : Tensor = aten::sub(%xu, %yu, %one)
  %d0 : Tensor = aten::select(%diff, %m1, %zero)
  %d1 : Tensor = aten::select(%diff, %m1, %one)
  %s0 : Tensor = aten::pow(%d0, %two)
  %s1 : Tensor = aten::pow(%d1, %two)
  %d : Tensor = aten::add(%s0, %s1, %one)
  %v0 : Tensor, %i0 : Tensor = aten::min(%d, %one, %false)
  %v1 : Tensor, %i1 : Tensor = aten::min(%d, %zero, %false)
  %r0 : Tensor = aten::mean(%v0, %none)
  %r1 : Tensor = aten::mean(%v1, %none)
  %r : Tensor = aten::add(%r0, %r1, %one)
  return (%r)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  // Each minimum and its mean: a one-branch sweep (a vector's mean stores the vector and ATen
  // averages it at call time: eager's bits).
  EXPECT_EQ(findNodes(g, "tsfuse::reduce_sweep").size(), 2u) << r.dump();
  EXPECT_TRUE(fileCheck(
      r.ir, [](FileCheck& fc) { fc.check_not("aten::sub")->check_not("aten::min")->check_not("aten::mean"); }));
  Gen gen(6);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({9, 2}, at::kFloat), gen.tensor({5, 2}, at::kFloat)}));
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({1, 2}, at::kDouble), gen.tensor({7, 2}, at::kDouble)}));
}

// --- the runtime helpers: each result, evaluated, equals the view of the broadcast value --------

std::vector<at::Tensor> callHelper(const char* name, const std::vector<c10::IValue>& args) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  torch::jit::Stack s(args.begin(), args.end());
  const auto& schema = op.schema().arguments();
  for (size_t i = s.size(); i < schema.size(); ++i) s.push_back(*schema[i].default_value());
  op.callBoxed(&s);
  return s.at(0).toTensorVector();
}

TEST(BroadcastViews, EqualTheViewOfTheBroadcastValue) {
  Gen g(7);
  // leaves: [N,1,2] (size-1 dim), [M,2], 0-dim, [2] (becomes [1] after select), [1,1,1]
  std::vector<at::Tensor> leaves = {g.tensor({4, 1, 2}, at::kFloat), g.tensor({3, 2}, at::kFloat),
                                    g.tensor({}, at::kDouble), g.tensor({2}, at::kDouble),
                                    g.tensor({1, 1, 1}, at::kFloat)};
  // Same dtype, sizes and values (layouts differ: these are views, not the broadcast result).
  auto same = [](const at::Tensor& want, const at::Tensor& got) -> ::testing::AssertionResult {
    if (want.scalar_type() != got.scalar_type() || want.sizes() != got.sizes() || !at::equal(want, got))
      return ::testing::AssertionFailure() << "want " << want.sizes() << " " << want.scalar_type() << ", got "
                                           << got.sizes() << " " << got.scalar_type();
    return ::testing::AssertionSuccess();
  };
  auto product = [](const std::vector<at::Tensor>& ls) {
    at::Tensor acc = ls[0];
    for (size_t i = 1; i < ls.size(); ++i) acc = acc * ls[i];
    return acc;
  };
  at::Tensor full = product(leaves);
  for (int64_t dim : {0, 1, 2, -1, -2, -3})
    for (int64_t idx : {0, 1, -1}) {
      if (idx == 1 && full.size(dim) < 2) continue;
      SCOPED_TRACE("select " + std::to_string(dim) + "," + std::to_string(idx));
      auto v = callHelper("tsfuse::broadcast_select", {at::TensorList(leaves), dim, idx});
      EXPECT_TRUE(same(full.select(dim, idx), product(v)));
      EXPECT_EQ(v[2].dim(), 0);                                                  // the 0-dim leaf stays 0-dim
      if (dim == -1 || dim == 2) EXPECT_EQ(v[3].sizes(), at::IntArrayRef({1}));  // never 0-dim
    }
  for (int64_t dim : {0, 1, 2, -1})
    for (auto [s, e] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 3}, {2, 2}, {-2, 100}}) {
      SCOPED_TRACE("slice " + std::to_string(dim) + "," + std::to_string(s) + ":" + std::to_string(e));
      auto v = callHelper("tsfuse::broadcast_slice", {at::TensorList(leaves), dim, s, e, int64_t{1}});
      EXPECT_TRUE(same(full.slice(dim, s, e), product(v)));
    }
  for (int64_t dim : {0, 1, 2, 3, -1, -4}) {
    auto v = callHelper("tsfuse::broadcast_unsqueeze", {at::TensorList(leaves), dim});
    EXPECT_TRUE(same(full.unsqueeze(dim), product(v)));
  }
  // squeeze: of a dim of size > 1 it leaves X as it is; of a size-1 dim every leaf reaching it
  // loses it, but a [1] double leaf stays 1-D (0-dim, it would no longer make the product double).
  std::vector<at::Tensor> column = {g.tensor({4, 1, 1}, at::kFloat), g.tensor({1, 3, 1}, at::kFloat),
                                    g.tensor({}, at::kDouble), g.tensor({1}, at::kDouble),
                                    g.tensor({1, 1, 1}, at::kFloat)};
  for (const auto& ls : {leaves, column})
    for (int64_t dim : {0, 1, 2, -1, -2, -3}) {
      SCOPED_TRACE("squeeze " + std::to_string(dim) + " of " + c10::str(product(ls).sizes()));
      auto v = callHelper("tsfuse::broadcast_squeeze", {at::TensorList(ls), dim});
      EXPECT_TRUE(same(product(ls).squeeze(dim), product(v)));
    }
  // All leaves of size 1 at the sliced dim: an empty slice must be empty.
  std::vector<at::Tensor> ones = {g.tensor({3, 1}, at::kFloat), g.tensor({1}, at::kFloat)};
  auto v =
      callHelper("tsfuse::broadcast_slice", {at::TensorList(ones), int64_t{1}, int64_t{1}, int64_t{5}, int64_t{1}});
  EXPECT_EQ(product(v).sizes(), at::IntArrayRef({3, 0}));
  // An index out of range of the broadcast size raises, as eager's select would.
  EXPECT_THROW(callHelper("tsfuse::broadcast_select", {at::TensorList(leaves), int64_t{-1}, int64_t{2}}), c10::Error);
}

// The strides of the dims with more than one element: those that address memory (a size-1 dim's
// stride addresses nothing, and TensorIterator's fast paths pick it differently; as in
// tests/fuzz/compare.py).
std::vector<std::pair<int64_t, int64_t>> addressingStrides(const at::Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1) out.emplace_back(d, t.stride(d));
  return out;
}

// The views carry the layout eager's view of f(leaves) has, so the ops after them lay their
// outputs out as eager's do. Found by the fuzzer (seed 43, program 2993): with a permuted leaf
// and a broadcast dim between the others, TensorIterator orders f over the selected views
// differently from the view of f over the leaves ([8,2,5] -> strides (40,8,1), eager (40,1,5)).
TEST(BroadcastViews, TakeTheLayoutOfEagersView) {
  const tsfuse::Expr f = tsfuse::Expr::parse("v1: maximum($0, $1); exp(%0)");
  auto downstream = [](const at::Tensor& v) { return -v + v; };  // an op after the view: its layout
  Gen g(3);
  std::vector<std::vector<at::Tensor>> cases = {
      {g.tensor({8, 1, 5}, at::kFloat).permute({2, 1, 0}), g.tensor({8, 1, 5}, at::kFloat).unsqueeze(-1)},
      {g.tensor({8, 2, 5}, at::kFloat).permute({2, 1, 0}), g.tensor({4, 1, 1, 8}, at::kFloat)},
      {g.tensor({4, 3}, at::kFloat).t(), g.tensor({3, 1}, at::kFloat)},
      {g.tensor({3, 1, 4}, at::kFloat).transpose(0, 2), g.tensor({2, 1}, at::kFloat)},
      {g.tensor({4, 6}, at::kFloat), g.tensor({4, 1}, at::kFloat)}};
  int copied = 0;
  for (const auto& leaves : cases) {
    const at::Tensor x = tsfuse::evalAten(f, leaves);
    struct View {
      const char* op;
      std::vector<c10::IValue> args;
      std::function<at::Tensor(const at::Tensor&)> eager;
    };
    std::vector<View> views;
    for (int64_t d = 0; d < x.dim(); ++d) {
      views.push_back(
          {"tsfuse::broadcast_select", {d, int64_t{0}}, [d](const at::Tensor& t) { return t.select(d, 0); }});
      views.push_back({"tsfuse::broadcast_slice", {d, int64_t{0}, int64_t{5}, int64_t{2}}, [d](const at::Tensor& t) {
                         return t.slice(d, 0, 5, 2);
                       }});
    }
    for (int64_t d = 0; d <= x.dim(); ++d)
      views.push_back({"tsfuse::broadcast_unsqueeze", {d}, [d](const at::Tensor& t) { return t.unsqueeze(d); }});
    for (int64_t d = 0; d < x.dim(); ++d)
      views.push_back({"tsfuse::broadcast_squeeze", {d}, [d](const at::Tensor& t) { return t.squeeze(d); }});
    for (const View& v : views) {
      SCOPED_TRACE(std::string(v.op) + " of " + std::to_string(x.dim()) + "-dim " + c10::str(x.sizes()) + " dim " +
                   std::to_string(v.args[0].toInt()));
      std::vector<c10::IValue> args = {at::TensorList(leaves)};
      args.insert(args.end(), v.args.begin(), v.args.end());
      std::vector<c10::IValue> withLayout = args;
      // the op's last argument: the schema defaults fill the rest
      const auto& schema = c10::Dispatcher::singleton().findSchemaOrThrow(v.op, "").schema().arguments();
      while (withLayout.size() + 1 < schema.size()) withLayout.push_back(*schema[withLayout.size()].default_value());
      withLayout.push_back(f.str());
      std::vector<at::Tensor> sunk = callHelper(v.op, withLayout);
      const at::Tensor want = downstream(v.eager(x)), got = downstream(tsfuse::evalAten(f, sunk));
      EXPECT_TRUE(at::equal(want, got));
      EXPECT_EQ(addressingStrides(want), addressingStrides(got)) << want.strides() << " vs " << got.strides();
      for (size_t i = 0; i < leaves.size(); ++i) copied += !sunk[i].is_alias_of(leaves[i]);
    }
  }
  EXPECT_GT(copied, 0);  // the cases include layouts the views alone would get wrong
}

// Empty leaves whose layout needs the copy: no negative extent for the copy's storage. Found by
// the fuzzer (seed 17, program 3599: a chunk of an empty slice of a transposed input, sliced again).
TEST(BroadcastViews, EmptyLeavesOfAPermutedLayout) {
  const tsfuse::Expr f = tsfuse::Expr::parse("v1: neg($0); add(%0, 1.5)");
  Gen g(4);
  const at::Tensor transposed = g.tensor({4, 1, 1}, at::kFloat).permute({2, 1, 0});             // [1, 1, 4]
  const std::vector<at::Tensor> leaves = {transposed.slice(1, 2).unsqueeze(0).chunk(2, 3)[1],   // [1, 1, 0, 2]
                                          g.tensor({3, 0, 5}, at::kFloat).permute({2, 1, 0})};  // [5, 0, 3]
  for (const at::Tensor& leaf : leaves) {
    const at::Tensor x = tsfuse::evalAten(f, {leaf});
    for (int64_t d = 0; d < x.dim(); ++d) {
      SCOPED_TRACE("slice of " + c10::str(leaf.sizes()) + " at dim " + std::to_string(d));
      std::vector<at::Tensor> sunk = callHelper(
          "tsfuse::broadcast_slice", {at::TensorList({leaf}), d, int64_t{1}, c10::IValue(), int64_t{1}, f.str()});
      const at::Tensor want = x.slice(d, 1), got = tsfuse::evalAten(f, sunk);
      EXPECT_EQ(want.sizes(), got.sizes());
      EXPECT_EQ(addressingStrides(-want + want), addressingStrides(-got + got));
    }
  }
}

}  // namespace

}  // namespace ir_sink_views_test
