// Numbers known only at run time that an op reads by value (pow's exponent, clamp's bounds,
// where's values: kernels/runtime/bind_numbers.h): they join the region as tsfuse::wrapped_number
// operands, and each call binds them into the program as literals, so the fused op computes what
// eager's Scalar overloads compute for every value, on its native path. The detection code this
// is for: `torch.clamp(d, min=self.eps)` and `torch.where(iou > self.thr, ...)` in a scripted
// module read float attributes, which TorchScript keeps as prim::GetAttr, not constants.
// tests/registry/runtime_number_test.cpp covers every schema and edge value one op at a time.
#include "ir_util.h"

#include "kernels/reference/aten_eval.h"
#include "kernels/backends/cpu/jit/jit.h"
#include "tsfuse/ops.h"

#include <limits>

namespace ir_bound_number_test {

namespace {

using namespace tsfuse_test;

std::shared_ptr<Graph> graphOf(const std::string& signature, const std::string& body) {
  return graphWithConstants(signature, body, "  %f1 : float = prim::Constant[value=1.]()\n");
}

// The pairwise intersection of intervals [a0, a1] x [b0, b1], clamped at a runtime epsilon, then
// thresholded at a runtime number: one fused op, eager's bits for every (eps, thr), including a
// NaN epsilon (clamp's lone NaN bound is ignored) and -0.0, each pair in turn through the same
// graph, on the native path.
TEST(BoundNumberIR, ClampAtAnEpsilonAndWhereAtAThresholdAreOneNativeOp) {
  auto g = graphOf("%a0 : Tensor, %a1 : Tensor, %b0 : Tensor, %b1 : Tensor, %eps : float, %thr : float", R"IR(
  %a0u : Tensor = aten::unsqueeze(%a0, %one)
  %a1u : Tensor = aten::unsqueeze(%a1, %one)
  %b0u : Tensor = aten::unsqueeze(%b0, %zero)
  %b1u : Tensor = aten::unsqueeze(%b1, %zero)
  %hi : Tensor = aten::min(%a1u, %b1u)
  %lo : Tensor = aten::max(%a0u, %b0u)
  %w : Tensor = aten::sub(%hi, %lo, %one)
  %c : Tensor = aten::clamp(%w, %eps, %none)
  %m : Tensor = aten::gt(%c, %thr)
  %t2 : float = aten::mul(%thr, %two)
  %o : Tensor = aten::where(%m, %c, %t2)
  return (%o)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  ASSERT_EQ(computingFusedOps(g), 1) << r.ir;
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("tsfuse::wrapped_number(%eps)")
        ->check("tsfuse::pairwise")
        ->check_not("aten::clamp")
        ->check_not("aten::where");
  }));
  // --explain and the viewer say what a by-value number costs
  EXPECT_NE(r.dump().find("%eps is read by value (clamp): each call writes it into the program"), std::string::npos)
      << r.dump();
  Gen gen(21);
  const at::Tensor a0 = gen.tensor({40}, at::kFloat), b0 = gen.tensor({30}, at::kFloat);
  const at::Tensor a1 = a0 + gen.tensor({40}, at::kFloat).abs(), b1 = b0 + gen.tensor({30}, at::kFloat).abs();
  for (auto [eps, thr] : std::vector<std::pair<double, double>>{
           {0.0, 0.25}, {1e-6, 0.5}, {-0.0, 0.0}, {std::nan(""), 0.1}, {0.3, -1.0}, {0.0, 0.25}}) {
    SCOPED_TRACE(c10::str("eps = ", eps, ", thr = ", thr));
    EXPECT_TRUE(sameOutputs(ref, g, {a0, a1, b0, b1, c10::IValue(eps), c10::IValue(thr)}));
    EXPECT_STREQ(tsfuse::lastPath(), "native");
  }
}

// A runtime exponent: pow(x, 2.0) multiplies, other exponents take ATen's pow kernel on the tile,
// each value its own program; an int exponent over an int tensor stays integral.
TEST(BoundNumberIR, PowByARuntimeExponentComputesEagersPowForEachValue) {
  auto g = graphOf("%a : Tensor, %b : Tensor, %k : float", R"IR(
  %d : Tensor = aten::sub(%a, %b, %one)
  %x : Tensor = aten::abs(%d)
  %p : Tensor = aten::pow(%x, %k)
  %n : Tensor = aten::neg(%p)
  return (%n)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  ASSERT_EQ(computingFusedOps(g), 1) << r.ir;
  EXPECT_EQ(exprOf(findNodes(g, "tsfuse::pairwise").at(0)), "v1: sub($0, $1); abs(%0); pow(%1, $2); neg(%2)");
  Gen gen(22);
  const at::Tensor a = gen.tensor({50, 1}, at::kFloat, kNaNInf), b = gen.tensor({1, 60}, at::kFloat);
  for (double k : {2.0, 0.5, 3.0, -1.0, 0.0, -2.5, 2.0}) {
    SCOPED_TRACE(k);
    EXPECT_TRUE(sameOutputs(ref, g, {a, b, c10::IValue(k)}));
  }
  auto gi = graphOf("%a : Tensor, %b : Tensor, %k : int", R"IR(
  %d : Tensor = aten::sub(%a, %b, %one)
  %x : Tensor = aten::abs(%d)
  %p : Tensor = aten::pow(%x, %k)
  return (%p)
)IR");
  auto refi = gi->copy();
  runPipelineOn(gi);
  ASSERT_EQ(computingFusedOps(gi), 1);
  const at::Tensor ai = gen.tensor({50, 1}, at::kInt), bi = gen.tensor({1, 60}, at::kInt);
  for (int64_t k : {2, 3, 0, 1}) {
    SCOPED_TRACE(k);
    EXPECT_TRUE(sameOutputs(refi, gi, {ai, bi, c10::IValue(k)}));
    EXPECT_EQ(runGraph(gi, {ai, bi, c10::IValue(k)})[0].toTensor().scalar_type(), at::kInt);
  }
}

// A reduction's epilogue reads numbers by value too (pow's exponent; clamp's lower bound beside a
// constant upper one): the epilogue's operands are bound and renumbered after the expression's.
TEST(BoundNumberIR, NumbersInAReductionsEpilogueAreBoundThere) {
  auto g = graphOf("%a : Tensor, %b : Tensor, %k : float, %lo : float", R"IR(
  %d : Tensor = aten::sub(%a, %b, %one)
  %x : Tensor = aten::abs(%d)
  %s : Tensor = aten::sum(%x, %dims1, %false, %none)
  %n : Tensor = aten::mul(%s, %k)
  %p : Tensor = aten::pow(%n, %k)
  %c : Tensor = aten::clamp(%p, %lo, %f1)
  return (%c)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  ASSERT_EQ(computingFusedOps(g), 1) << r.ir;
  EXPECT_TRUE(fileCheck(
      r.ir, [](FileCheck& fc) { fc.check("tsfuse::reduce")->check_not("aten::pow")->check_not("aten::clamp"); }));
  Gen gen(23);
  const at::Tensor a = gen.tensor({70, 1}, at::kFloat), b = gen.tensor({1, 90}, at::kFloat);
  for (auto [k, lo] :
       std::vector<std::pair<double, double>>{{0.02, 0.1}, {0.01, std::nan("")}, {-0.03, 0.5}, {0.02, 0.1}}) {
    SCOPED_TRACE(c10::str("k = ", k, ", lo = ", lo));
    EXPECT_TRUE(sameOutputs(ref, g, {a, b, c10::IValue(k), c10::IValue(lo)}, /*exact=*/false));
  }
}

// The Gaussian kernel sum with a runtime exponent in stage 0's epilogue: the chain's row sums are
// folded into stage 0 (kernels/runtime/chain.cpp, foldedRowSums), which runs stage 0 itself, and binds its
// numbers as every fused call does: eager's bits for every exponent (pow(x, 2.0) multiplies, 0.5
// takes sqrt; unbound, the program read the exponent as a tensor and missed eager's bits).
TEST(BoundNumberIR, AChainsFoldedRowSumsBindStageZerosNumbers) {
  auto g = graphOf("%x : Tensor, %y : Tensor, %p : float", R"IR(
  %xu : Tensor = aten::unsqueeze(%x, %one)
  %yu : Tensor = aten::unsqueeze(%y, %zero)
  %d : Tensor = aten::sub(%xu, %yu, %one)
  %q : Tensor = aten::pow(%d, %two)
  %dl : int[] = prim::ListConstruct(%m1)
  %r : Tensor = aten::sum(%q, %dl, %false, %none)
  %s : Tensor = aten::sub(%r, %f1, %one)
  %w : Tensor = aten::pow(%s, %p)
  %n : Tensor = aten::neg(%w)
  %e : Tensor = aten::exp(%n)
  %o : Tensor = aten::sum(%e, %dims1, %false, %none)
  return (%o)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  ASSERT_EQ(computingFusedOps(g), 1) << r.ir;
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("tsfuse::reduce_chain")->check_not("aten::pow"); }));
  Gen gen(26);
  const at::Tensor x = gen.tensor({70, 3}, at::kFloat), y = gen.tensor({90, 3}, at::kFloat);
  for (double p : {2.0, 0.5, 1.5, 2.0}) {
    SCOPED_TRACE(p);
    EXPECT_TRUE(sameOutputs(ref, g, {x, y, c10::IValue(p)}));
  }
}

// A thread keeps its last binding: the same call with the same numbers reuses it, and a number
// that changes, even 0.0 to -0.0 (equal as numbers, not as where's values), binds again.
TEST(BoundNumberIR, ARepeatedCallRebindsWhenANumberChangesItsBits) {
  auto g = graphOf("%a : Tensor, %b : Tensor, %k : float", R"IR(
  %d : Tensor = aten::sub(%a, %b, %one)
  %m : Tensor = aten::gt(%d, %zero)
  %o : Tensor = aten::where(%m, %d, %k)
  return (%o)
)IR");
  auto ref = g->copy();
  runPipelineOn(g);
  ASSERT_EQ(computingFusedOps(g), 1);
  Gen gen(25);
  const at::Tensor a = gen.tensor({9, 1}, at::kFloat), b = gen.tensor({1, 11}, at::kFloat);
  for (double k : {0.0, -0.0, -0.0, 0.0, 0.5, 0.0}) {
    SCOPED_TRACE(k);
    EXPECT_TRUE(sameOutputs(ref, g, {a, b, c10::IValue(k)}));
    const at::Tensor out = runGraph(g, {a, b, c10::IValue(k)})[0].toTensor();
    const at::Tensor filled = out.masked_select((a - b) <= 0);
    ASSERT_GT(filled.numel(), 0);
    EXPECT_EQ(at::signbit(filled).all().item<bool>(), std::signbit(k));
  }
}

// A number that changes on every call (a threshold the model computes from its data) compiles
// one kernel, not one per value: the compiled code reads its literals from each call, so only the
// lowering runs again. Values whose lowering differs (a NaN bound, which clamp ignores) may
// compile their own; none of the others does, and each runs compiled, with eager's bits.
TEST(BoundNumberIR, ANumberThatChangesOnEveryCallCompilesOneKernel) {
  auto g = graphOf("%a : Tensor, %b : Tensor, %eps : float, %thr : float", R"IR(
  %au : Tensor = aten::unsqueeze(%a, %one)
  %bu : Tensor = aten::unsqueeze(%b, %zero)
  %d : Tensor = aten::sub(%au, %bu, %one)
  %c : Tensor = aten::clamp(%d, %eps, %none)
  %m : Tensor = aten::gt(%c, %thr)
  %o : Tensor = aten::where(%m, %c, %thr)
  return (%o)
)IR");
  auto ref = g->copy();
  runPipelineOn(g);
  ASSERT_EQ(computingFusedOps(g), 1);
  JitOn on(true);
  if (!tsfuse::cpu::jit::enabled()) GTEST_SKIP() << "no compiled kernels on this CPU";
  Gen gen(27);
  const at::Tensor a = gen.tensor({64}, at::kFloat, kNaNInf), b = gen.tensor({48}, at::kFloat);
  EXPECT_TRUE(sameOutputs(ref, g, {a, b, c10::IValue(0.25), c10::IValue(0.5)}));  // compiles
  const int64_t compiled = tsfuse::cpu::jit::kernelsCompiled();
  for (double v : {1e-6, -0.0, 0.0, 3.5, -1e30, 0.125, std::numeric_limits<double>::infinity(), 1e-6}) {
    SCOPED_TRACE(v);
    const int64_t tiles = tsfuse::cpu::jit::tilesRun();
    EXPECT_TRUE(sameOutputs(ref, g, {a, b, c10::IValue(v), c10::IValue(v / 3)}));
    EXPECT_GT(tsfuse::cpu::jit::tilesRun(), tiles) << "not run compiled";
  }
  EXPECT_EQ(tsfuse::cpu::jit::kernelsCompiled(), compiled);
  EXPECT_TRUE(sameOutputs(ref, g, {a, b, c10::IValue(std::nan("")), c10::IValue(0.5)}));
}

// tsfuse::wrapped_number runs on every call of a graph that reads a runtime number; it reuses a
// 0-dim tensor of its thread that nothing else holds any more rather than allocate one (small
// blocks allocated between a fused op's large outputs split glibc's free heap: measured, an IoU
// over 1000 x 1000 boxes thresholded at self.thr faulted in 0-440 fresh pages a call, up to
// 2.8x its time). A tensor still held, or whose storage a view still holds, is never rewritten.
TEST(WrappedNumber, ReusesAFreeTensorAndNeverOneInUse) {
  using tsfuse::reusedWrappedNumber;
  at::Tensor a = reusedWrappedNumber(1.5), b = reusedWrappedNumber(2.5);
  EXPECT_NE(a.unsafeGetTensorImpl(), b.unsafeGetTensorImpl());
  EXPECT_TRUE(tsfuse::isWrappedNumber(a));
  EXPECT_EQ(a.item<double>(), 1.5);
  const c10::TensorImpl* was = a.unsafeGetTensorImpl();
  a.reset();
  at::Tensor c = reusedWrappedNumber(3.0);  // a's, free again
  EXPECT_EQ(c.unsafeGetTensorImpl(), was);
  EXPECT_EQ(c.item<double>(), 3.0);
  EXPECT_EQ(b.item<double>(), 2.5);
  const at::Tensor view = c.view({1});
  c.reset();
  b.reset();
  at::Tensor d = reusedWrappedNumber(4.0);
  EXPECT_NE(d.unsafeGetTensorImpl(), was);  // its storage is still the view's
  EXPECT_EQ(view.item<double>(), 3.0);
  EXPECT_EQ(d.item<double>(), 4.0);
  at::Tensor i = reusedWrappedNumber(int64_t(7)), t = reusedWrappedNumber(true);
  EXPECT_EQ(i.scalar_type(), at::kLong);
  EXPECT_EQ(i.item<int64_t>(), 7);
  EXPECT_EQ(t.scalar_type(), at::kBool);
  EXPECT_TRUE(t.item<bool>());
  EXPECT_TRUE(tsfuse::isWrappedNumber(i) && tsfuse::isWrappedNumber(t));
}

// clamp_min / clamp_max with a NaN number fill the result with NaN, where clamp's lone NaN bound is
// ignored: the registry keeps them apart (a constant NaN was computed as clamp's before).
TEST(BoundNumberIR, ClampMinWithANaNBoundIsNaNEverywhere) {
  auto g = graphOf("%a : Tensor, %b : Tensor, %k : float", R"IR(
  %nan : float = prim::Constant[value=7.5]()
  %d : Tensor = aten::sub(%a, %b, %one)
  %c : Tensor = aten::clamp_min(%d, %nan)
  %e : Tensor = aten::clamp_max(%d, %k)
  %f : Tensor = aten::clamp(%d, %nan, %none)
  %s : Tensor = aten::add(%c, %e, %one)
  %o : Tensor = aten::add(%s, %f, %one)
  return (%o, %f)
)IR");
  for (torch::jit::Node* n : g->nodes())  // the IR parser reads no NaN: %nan's value is set here
    if (n->kind() == c10::prim::Constant && n->output()->type()->kind() == c10::TypeKind::FloatType &&
        n->f(c10::attr::value) == 7.5)
      n->f_(c10::attr::value, std::nan(""));
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  ASSERT_EQ(computingFusedOps(g), 1) << r.ir;  // %d and %f, read twice, stay operands
  EXPECT_NE(r.ir.find("clamp_min($0, nan); clamp_max($0, $1)"), std::string::npos) << r.ir;
  Gen gen(24);
  const at::Tensor a = gen.tensor({6, 1}, at::kFloat), b = gen.tensor({1, 7}, at::kFloat);
  for (double k : {0.0, std::nan("")}) {
    SCOPED_TRACE(k);
    EXPECT_TRUE(sameOutputs(ref, g, {a, b, c10::IValue(k)}));
    const auto out = runGraph(g, {a, b, c10::IValue(k)});
    EXPECT_TRUE(out[0].toTensor().isnan().all().item<bool>());
    EXPECT_FALSE(out[1].toTensor().isnan().any().item<bool>());
  }
}

}  // namespace

}  // namespace ir_bound_number_test
