// IR-string tests of the canonicalize pass: in-place ops on fresh intermediates become
// out-of-place (and then fuse), in-place ops whose target is visible elsewhere (an input, a view
// read later, a list, an output of another block) stay, values-only max/min(dim) become their values (fused as amax/amin),
// and identity slices that raise nothing of their own disappear. Every case also runs before/after through the interpreter.
#include "ir_util.h"

#include "passes/canonicalize.h"

namespace ir_canonicalize_test {

namespace {

using namespace tsfuse_test;

std::shared_ptr<Graph> graphOf(const std::string& body) {
  return graphWithConstants("%a : Tensor, %b : Tensor", body,
                            "  %big : int = prim::Constant[value=9223372036854775807]()\n");
}

std::vector<c10::IValue> inputs(uint64_t seed) {
  Gen g(seed);
  return {g.tensor({6, 1}, at::kFloat), g.tensor({1, 5}, at::kFloat)};
}

PassRun runCanonicalize(std::shared_ptr<Graph>& g) { return runPass(g, tsfuse::Canonicalize); }

// A graph of (%a, %b, %flag : bool) computes what `ref` does for both flags.
void expectSameOutputsEitherWay(const std::shared_ptr<Graph>& ref, const std::shared_ptr<Graph>& g, uint64_t seed) {
  for (bool flag : {true, false}) {
    auto in = inputs(seed);
    in.emplace_back(flag);
    EXPECT_TRUE(sameOutputs(ref, g, in)) << "flag " << flag;
  }
}

TEST(CanonicalizeIR, InPlaceClampOfIntermediateBecomesOutOfPlaceAndFuses) {
  auto g = graphOf(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %c : Tensor = aten::clamp_(%s, %zero, %none)
  %m : Tensor = aten::mul(%s, %b)
  return (%m)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  EXPECT_TRUE(c.changed) << c.dump();
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check_not("aten::clamp_")->check("aten::clamp("); }));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(1)));
  PassRun p = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << p.dump();
  EXPECT_TRUE(sameOutputs(ref, g, inputs(2)));
}

TEST(CanonicalizeIR, InPlaceResultAndLaterUsesSeeTheNewValue) {
  // The in-place result and the mutated tensor are both returned after the write.
  auto g = graphOf(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %r : Tensor = aten::abs(%s)
  %c : Tensor = aten::mul_(%s, %two)
  %t : Tensor = aten::div(%a, %b)
  %e : Tensor = aten::exp_(%t)
  %m : Tensor = aten::mul(%s, %r)
  return (%m, %c, %s, %e, %t)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  EXPECT_EQ(c.rewrites(), 2) << c.dump();
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check_not("aten::mul_")->check_not("aten::exp_"); }));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(3)));
}

TEST(CanonicalizeIR, InPlaceWhoseOutOfPlaceFormCouldChangeDtypeOrShapeGoesThroughInplaceResult) {
  // div_ on a possibly-integer sum (eager raises; div would return floats), mul_ on a possibly-bool
  // product (bool * 2 promotes), add_ of a tensor (could broadcast or promote), lt_ (keeps dtype):
  // each becomes its functional form and inplace_result (x's dtype, or the in-place op's error).
  auto g = graphOf(R"IR(
  %s : Tensor = aten::add(%a, %b, %one)
  %c : Tensor = aten::div_(%s, %two)
  %p : Tensor = aten::mul(%a, %b)
  %d : Tensor = aten::mul_(%p, %two)
  %q : Tensor = aten::sub(%a, %b, %one)
  %e : Tensor = aten::add_(%q, %b, %one)
  %u : Tensor = aten::sub(%a, %b, %one)
  %f : Tensor = aten::lt_(%u, %one)
  return (%c, %d, %e, %f)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  EXPECT_EQ(c.rewrites(), 4) << c.dump();
  EXPECT_EQ(findNodes(g, "tsfuse::inplace_result").size(), 4u) << c.dump();
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) {
    fc.check_not("aten::div_")->check_not("aten::mul_")->check_not("aten::add_")->check_not("aten::lt_");
  }));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(20)));
  Gen gen(21);
  std::vector<c10::IValue> ints{gen.tensor({6, 1}, at::kLong), gen.tensor({1, 5}, at::kLong)};
  EXPECT_EQ(errorOf(g, ints), "RuntimeError: result type Float can't be cast to the desired output type Long");
  EXPECT_EQ(errorOf(g, ints), errorOf(ref, ints));
}

TEST(CanonicalizeIR, InPlaceOnGraphInputIsKept) {
  auto g = graphOf(R"IR(
  %c : Tensor = aten::clamp_(%a, %zero, %none)
  %s : Tensor = aten::sub(%a, %b, %one)
  return (%s)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check("aten::clamp_"); }));
  EXPECT_TRUE(c.rejectedWith("is not a fresh result")) << c.dump();
  EXPECT_TRUE(sameOutputs(ref, g, inputs(4)));
}

TEST(CanonicalizeIR, InPlaceOnIntermediateWithAViewReadLaterIsKept) {
  // %v aliases %s; it is read after the write, so it must see the clamped values.
  auto g = graphOf(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %v : Tensor = aten::select(%s, %zero, %zero)
  %c : Tensor = aten::clamp_(%s, %zero, %none)
  %m : Tensor = aten::mul(%v, %two)
  return (%m)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check("aten::clamp_"); }));
  EXPECT_TRUE(c.rejectedWith("which may alias it")) << c.dump();
  EXPECT_TRUE(sameOutputs(ref, g, inputs(5)));
  runPipelineOn(g);
  EXPECT_TRUE(sameOutputs(ref, g, inputs(6)));
}

TEST(CanonicalizeIR, InPlaceOnIntermediateWhoseViewIsAGraphOutputIsKept) {
  // The returned %v aliases %s: the caller must see the doubled values.
  auto g = graphOf(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %v : Tensor = aten::unsqueeze(%s, %zero)
  %c : Tensor = aten::mul_(%s, %two)
  %m : Tensor = aten::abs(%c)
  return (%v, %m)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check("aten::mul_"); })) << c.dump();
  EXPECT_TRUE(c.rejectedWith("which may alias it")) << c.dump();
  runPipelineOn(g);
  EXPECT_TRUE(sameOutputs(ref, g, inputs(12)));
}

TEST(CanonicalizeIR, InPlaceOnIntermediateHeldByAListIsKept) {
  auto g = graphOf(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %l : Tensor[] = prim::ListConstruct(%s)
  %c : Tensor = aten::mul_(%s, %two)
  return (%l)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check("aten::mul_"); })) << c.dump();
  EXPECT_TRUE(sameOutputs(ref, g, inputs(7)));
}

TEST(CanonicalizeIR, InPlaceOnIntermediateAppendedToAnInputListIsKept) {
  // The caller's list holds %s once append runs: it must see the doubled values. Nothing held
  // the fresh %s before that use, so refusing a non-reading use before the write is what keeps it.
  auto g = parseGraph(R"IR(
graph(%a : Tensor, %b : Tensor, %l : Tensor[]):
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %s : Tensor = aten::sub(%a, %b, %one)
  %x : Tensor[] = aten::append(%l, %s)
  %c : Tensor = aten::mul_(%s, %two)
  %m : Tensor = aten::abs(%c)
  return (%m)
)IR");
  PassRun c = runCanonicalize(g);
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check("aten::append")->check("aten::mul_"); })) << c.dump();
  EXPECT_TRUE(c.rejectedWith("aten::append")) << c.dump();
}

TEST(CanonicalizeIR, InPlaceInsideABranchIsKept) {
  auto g = parseGraph(R"IR(
graph(%a : Tensor, %b : Tensor, %flag : bool):
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %s : Tensor = aten::sub(%a, %b, %one)
  %r : Tensor = prim::If(%flag)
    block0():
      %c : Tensor = aten::mul_(%s, %two)
      -> (%c)
    block1():
      -> (%s)
  %m : Tensor = aten::add(%s, %r, %one)
  return (%m)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check("aten::mul_"); }));
  expectSameOutputsEitherWay(ref, g, 8);
}

// Out of place, a write nothing reads would be dropped as dead code, and with it the error eager's
// write raises (a term of another device or shape): it stays.
TEST(CanonicalizeIR, InPlaceNothingReadsIsKept) {
  auto g = graphOf(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %c : Tensor = aten::mul_(%s, %two)
  %m : Tensor = aten::abs(%a)
  return (%m)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check("aten::mul_"); })) << c.dump();
  EXPECT_TRUE(c.rejectedWith("nothing reads what it writes")) << c.dump();
  EXPECT_TRUE(sameOutputs(ref, g, inputs(9)));
}

// A write in a branch to a tensor the code after the branch reads: read after the write, from
// outside the write's block.
TEST(CanonicalizeIR, InPlaceInABranchReadAfterItIsKept) {
  auto g = parseGraph(R"IR(
graph(%a : Tensor, %b : Tensor, %flag : bool):
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %s : Tensor = aten::sub(%a, %b, %one)
  %r : Tensor = prim::If(%flag)
    block0():
      %c : Tensor = aten::mul_(%s, %two)
      -> (%a)
    block1():
      -> (%b)
  %m : Tensor = aten::add(%s, %r, %one)
  return (%m)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check("aten::mul_"); })) << c.dump();
  EXPECT_TRUE(c.rejectedWith("is not a fresh result in the same block")) << c.dump();
  expectSameOutputsEitherWay(ref, g, 10);
}

// max(dim)'s values become tsfuse::extremum_values, fused as amax whose gradient goes to max's index
// ("amax:index"): a plain amax would split it among ties.
TEST(CanonicalizeIR, ValuesOnlyMaxWithDimBecomesAmaxAndFuses) {
  auto g = graphOf(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %v : Tensor, %i : Tensor = aten::max(%d, %one, %false)
  return (%v)
)IR");
  auto ref = g->copy();
  auto canonical = g->copy();
  PassRun c = runCanonicalize(canonical);
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check("tsfuse::extremum_values(")->check_not("aten::amax"); }));
  PassRun p = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::reduce").size(), 1u) << p.dump();
  EXPECT_TRUE(fileCheck(
      p.ir, [](FileCheck& fc) { fc.check("\"amax:index\"")->check_not("aten::max")->check_not("aten::sub"); }));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(9)));
}

TEST(CanonicalizeIR, MaxWithDimWhoseIndicesAreUsedStays) {
  auto g = graphOf(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %v : Tensor, %i : Tensor = aten::max(%s, %one, %false)
  return (%v, %i)
)IR");
  PassRun c = runCanonicalize(g);
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check("aten::max")->check_not("aten::amax"); }));
}

TEST(CanonicalizeIR, IdentitySlicesThatCannotRaiseDisappear) {
  auto g = graphOf(R"IR(
  %u : Tensor = aten::unsqueeze(%a, %one)
  %s0 : Tensor = aten::slice(%u, %one, %zero, %big, %one)
  %s1 : Tensor = aten::slice(%b, %zero, %none, %none, %one)
  %s2 : Tensor = aten::slice(%s1, %one, %zero, %two, %one)
  %d : Tensor = aten::sub(%s0, %s2, %one)
  %e : Tensor = aten::slice(%a, %zero, %one, %big, %one)
  return (%d, %e)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  // %s0 goes (dim 1 of an unsqueezed value: rank >= 2), %s1 goes (dim 0, read by a slice, which
  // raises the same error on a 0-dim %b); the real slices (end 2, start 1) stay.
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check_count("aten::slice", 2, true); }));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(10)));
}

TEST(CanonicalizeIR, IdentitySliceThatMayRaiseStays) {
  // x[:, None, :] on a 1-D x raises "Dimension out of range": dropping the last slice returned a
  // value of the wrong shape. b[:, 0] on a 0-dim b raises slice's error, not select's.
  auto g = graphOf(R"IR(
  %u : Tensor = aten::unsqueeze(%a, %one)
  %s : Tensor = aten::slice(%u, %two, %none, %none, %one)
  %t : Tensor = aten::slice(%b, %zero, %none, %none, %one)
  %c : Tensor = aten::select(%t, %one, %zero)
  %d : Tensor = aten::sub(%s, %c, %one)
  return (%d)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check_count("aten::slice", 2, true); })) << c.ir;
  EXPECT_TRUE(sameOutputs(ref, g, inputs(12)));
  Gen gen(13);
  for (auto [a, b] : {std::pair{gen.tensor({6}, at::kFloat), gen.tensor({1, 5}, at::kFloat)},
                      std::pair{gen.tensor({6, 1}, at::kFloat), at::scalar_tensor(2.0)}}) {
    const std::string want = errorOf(ref, {a, b});
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(errorOf(g, {a, b}), want);
  }
}

TEST(CanonicalizeIR, IdentitySliceThatIsReturnedOrWrittenStays) {
  auto g = graphOf(R"IR(
  %s0 : Tensor = aten::slice(%a, %zero, %none, %none, %one)
  %s1 : Tensor = aten::slice(%b, %zero, %none, %none, %one)
  %w : Tensor = aten::mul_(%s1, %two)
  %d : Tensor = aten::sub(%s1, %a, %one)
  return (%s0, %d)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check_count("aten::slice", 2, true); }));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(11)));
}

}  // namespace

}  // namespace ir_canonicalize_test

namespace ir_canonicalize_test {
namespace {

using namespace tsfuse_test;
using torch::jit::Node;
using torch::jit::Value;

// `mask &= (x - y > eps)` (ultralytics' point-in-box test): Python's augmented assignment is
// aten::__iand__, in place on the fresh mask like any x.op_(y), so the four tests fuse as one.
TEST(CanonicalizeIR, AugmentedAssignmentOnAFreshMaskBecomesOutOfPlaceAndFuses) {
  auto g = graphOf(R"IR(
  %d1 : Tensor = aten::sub(%a, %b, %one)
  %m : Tensor = aten::gt(%d1, %zero)
  %d2 : Tensor = aten::sub(%b, %a, %one)
  %g2 : Tensor = aten::gt(%d2, %zero)
  %m2 : Tensor = aten::__iand__(%m, %g2)
  %d3 : Tensor = aten::mul(%a, %b)
  %g3 : Tensor = aten::lt(%d3, %two)
  %m3 : Tensor = aten::__ior__(%m2, %g3)
  return (%m3)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  EXPECT_EQ(c.rewrites(), 2) << c.dump();
  EXPECT_TRUE(fileCheck(c.ir, [](FileCheck& fc) { fc.check_not("__iand__")->check_not("__ior__"); }));
  EXPECT_TRUE(sameOutputs(ref, g, inputs(5)));
  PassRun p = runPipelineOn(g);
  EXPECT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << p.dump();
  EXPECT_TRUE(sameOutputs(ref, g, inputs(6)));
}

// pyro's kernels compute a parameter's transform once per input (exp(l) * 1 + 0 twice); the
// executor's CSE merges them before the load-time pass runs, and so does canonicalize, so that
// the function fuses to the same ops offline.
TEST(CanonicalizeIR, CommonSubexpressionsMergeAsTheExecutorMergesThem) {
  auto g = graphOf(R"IR(
  %e1 : Tensor = aten::exp(%b)
  %s1 : Tensor = aten::mul(%e1, %two)
  %x : Tensor = aten::div(%a, %s1)
  %e2 : Tensor = aten::exp(%b)
  %s2 : Tensor = aten::mul(%e2, %two)
  %z : Tensor = aten::div(%a, %s2)
  %r : Tensor = aten::sub(%x, %z, %one)
  return (%r)
)IR");
  auto ref = g->copy();
  PassRun c = runCanonicalize(g);
  EXPECT_TRUE(c.changed);
  EXPECT_EQ(findNodes(g, "aten::exp").size(), 1u) << c.dump();
  EXPECT_EQ(findNodes(g, "aten::div").size(), 1u) << c.dump();
  EXPECT_TRUE(sameOutputs(ref, g, inputs(4)));
}

}  // namespace
}  // namespace ir_canonicalize_test
