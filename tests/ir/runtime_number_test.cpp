// Python numbers known only at run time as fused operands: a float graph input (the mission's
// bandwidth s), an int from x.size(0), a module attribute. Each is read through
// tsfuse::wrapped_number, the 0-dim tensor ATen's Scalar overloads see, so the fused graph keeps
// eager's dtypes (an int tensor divided by a float number is float32, not float64) and bits.
// tests/registry/runtime_number_test.cpp covers every listed schema; this file the graphs.
#include "ir_util.h"

namespace ir_runtime_number_test {

namespace {

using namespace tsfuse_test;

std::shared_ptr<Graph> graphOf(const std::string& signature, const std::string& body) {
  return graphWithConstants(
      signature, body, "  %m2 : int = prim::Constant[value=-2]()\n  %dims0 : int[] = prim::Constant[value=[0]]()\n");
}

// The pipeline over `g`, which must leave ONE fused op (runtime numbers' wrappers aside).
PassRun pipelineToOneOp(std::shared_ptr<Graph>& g) {
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(r.changed) << r.dump();
  EXPECT_EQ(computingFusedOps(g), 1) << r.ir;
  return r;
}

// The mission's torch.exp(-((x[:, None] - y[None]) ** 2).sum(-1) / s).sum(1) with s a float
// argument: ONE fused op, the division by s in the first reduction's epilogue.
TEST(RuntimeNumberIR, MissionKernelSumWithAFloatBandwidthIsOneOp) {
  auto g = graphOf("%x : Tensor, %y : Tensor, %s : float", R"IR(
  %xu : Tensor = aten::unsqueeze(%x, %one)
  %yu : Tensor = aten::unsqueeze(%y, %zero)
  %d : Tensor = aten::sub(%xu, %yu, %one)
  %q : Tensor = aten::pow(%d, %two)
  %dl : int[] = prim::ListConstruct(%m1)
  %r : Tensor = aten::sum(%q, %dl, %false, %none)
  %n : Tensor = aten::neg(%r)
  %v : Tensor = aten::div(%n, %s)
  %e : Tensor = aten::exp(%v)
  %o : Tensor = aten::sum(%e, %dims1, %false, %none)
  return (%o)
)IR");
  auto ref = g->copy();
  PassRun r = pipelineToOneOp(g);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("tsfuse::wrapped_number(%s)")
        ->check("tsfuse::reduce_chain")
        ->check_not("aten::div")
        ->check_not("aten::exp");
  }));
  Gen gen(11);
  for (double s : {0.5, 3.0, 1e-3}) {
    SCOPED_TRACE(s);
    EXPECT_TRUE(
        sameOutputs(ref, g, {gen.tensor({70, 3}, at::kFloat), gen.tensor({90, 3}, at::kFloat), c10::IValue(s)}));
  }
}

// A mean written as a sum over x.size(0), over int tensors: true division by an int number gives
// float32 (the default dtype), as eager's Scalar overload does; a plain 0-dim int64 tensor operand
// would not change it, but a float number over int tensors would give float64 if it were not a
// wrapped number.
TEST(RuntimeNumberIR, SizesAndFloatsOverIntTensorsKeepEagersDtypes) {
  auto g = graphOf("%x : Tensor, %y : Tensor, %t : float", R"IR(
  %n : int = aten::size(%x, %zero)
  %d : Tensor = aten::sub(%x, %y, %one)
  %a : Tensor = aten::abs(%d)
  %q : Tensor = aten::div(%a, %n)
  %c : Tensor = aten::lt(%q, %t)
  %w : Tensor = aten::mul(%a, %t)
  %s : Tensor = aten::sum(%w, %dims0, %false, %none)
  %k : Tensor = aten::sum(%c, %dims0, %false, %none)
  return (%s, %k)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  ASSERT_TRUE(r.changed) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("tsfuse::wrapped_number(%t)")->check("tsfuse::"); }));
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check_regex("%[0-9]+ : int = aten::size")->check_regex("tsfuse::wrapped_number\\(%[0-9]+\\)");
  }));
  Gen gen(12);
  for (at::ScalarType dtype : {at::kInt, at::kLong, at::kFloat}) {
    SCOPED_TRACE(c10::toString(dtype));
    const std::vector<c10::IValue> in = {gen.tensor({40, 1}, dtype), gen.tensor({1, 30}, dtype), c10::IValue(0.7)};
    EXPECT_TRUE(sameOutputs(ref, g, in));
    auto outs = runGraph(g, in);
    EXPECT_EQ(outs[0].toTensor().scalar_type(), at::kFloat) << "float32, not float64";
  }
}

// x.mul_(s) on a fresh float value becomes mul(x, s) (a float number cannot change a float
// value's dtype) and fuses; on a bool value a bool number could, and it stays in place.
TEST(RuntimeNumberIR, InPlaceOpsWithRuntimeNumbersCanonicalizeAsConstantsWould) {
  auto g = graphOf("%x : Tensor, %y : Tensor, %s : float", R"IR(
  %d : Tensor = aten::sub(%x, %y, %one)
  %e : Tensor = aten::exp(%d)
  %m : Tensor = aten::mul_(%e, %s)
  %o : Tensor = aten::sum(%m, %dims1, %false, %none)
  return (%o)
)IR");
  auto ref = g->copy();
  PassRun r = pipelineToOneOp(g);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("aten::mul_"); }));
  Gen gen(13);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({8, 1}, at::kFloat), gen.tensor({1, 9}, at::kFloat), c10::IValue(-1.5)}));
}

// sink_views pushes a view of an elementwise value to its leaves; a runtime number is no tensor to
// view: the copies read it as the originals do, and the whole computation is one fused op.
TEST(RuntimeNumberIR, AViewOfAValueReadingARuntimeNumberSinksToItsTensors) {
  auto g = graphOf("%a : Tensor, %b : Tensor, %c : Tensor, %s : float", R"IR(
  %m : Tensor = aten::mul(%b, %s)
  %d : Tensor = aten::sub(%a, %m, %one)
  %u : Tensor = aten::unsqueeze(%d, %one)
  %w : Tensor = aten::sub(%u, %c, %one)
  %x : Tensor = aten::abs(%w)
  %r : Tensor = aten::sum(%x, %dims0, %false, %none)
  return (%r)
)IR");
  auto ref = g->copy();
  PassRun r = pipelineToOneOp(g);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("tsfuse::broadcast_unsqueeze")->check("tsfuse::wrapped_number(%s)")->check("tsfuse::reduce");
  }));
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("aten::unsqueeze")->check_not("aten::mul"); }));
  Gen gen(14);
  EXPECT_TRUE(sameOutputs(ref, g,
                          {gen.tensor({6, 5}, at::kFloat), gen.tensor({6, 5}, at::kFloat),
                           gen.tensor({6, 7, 5}, at::kFloat), c10::IValue(0.75)}));
}

// A number only a region with nothing to broadcast reads does not start a fusion: x * s over one
// tensor of known shape is left to TorchScript's own fusers, as x * 0.5 is.
TEST(RuntimeNumberIR, NegativeANumberBroadcastsNothing) {
  auto g = graphOf("%x : Float(4, 5, strides=[5, 1], device=cpu), %s : float", R"IR(
  %a : Float(4, 5, strides=[5, 1], device=cpu) = aten::abs(%x)
  %m : Float(4, 5, strides=[5, 1], device=cpu) = aten::mul(%a, %s)
  return (%m)
)IR");
  PassRun r = runPairwise(g);
  EXPECT_FALSE(r.changed) << r.dump();
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("tsfuse::"); }));
}

}  // namespace

}  // namespace ir_runtime_number_test
