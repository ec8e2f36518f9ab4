// IR-string tests of snapshot_written_operands (passes/snapshot_written_operands.cpp): a fused op's
// operand that a later in-place op writes is read through tsfuse::saved_operand, and the others
// are not, each case named; the graphs compute what the originals did.
#include "ir_util.h"

#include "passes/snapshot_written_operands.h"

namespace ir_snapshot_written_operands_test {

namespace {

using namespace tsfuse_test;

std::vector<c10::IValue> inputs(uint64_t seed) {
  Gen g(seed);
  return {g.tensor({4, 1}, at::kFloat), g.tensor({1, 5}, at::kFloat)};
}

std::shared_ptr<Graph> graphOf(const std::string& body) {
  return graphWithConstants("%a : Tensor, %b : Tensor", body, R"IR(
  %three : int = prim::Constant[value=3]()
  %ftwo : float = prim::Constant[value=2.]()
)IR",
                            /*named=*/true);
}

// |a - b| summed over b's dim, then b doubled in place: b's values as the op read them are the
// backward's.
TEST(SnapshotWrittenOperandsIR, AnOperandWrittenAfterTheOpIsReadThroughACopy) {
  auto g = graphOf(R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %r : Tensor = aten::sum(%d, %dims1, %false, %none)
  %w : Tensor = aten::mul_(%b, %ftwo)
  return (%r, %w)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check("tsfuse::saved_operand(%b, ")->check("tsfuse::reduce")->check("aten::mul_(%b");
  })) << r.ir;
  EXPECT_TRUE(sameOutputs(ref, g, inputs(1)));
  EXPECT_FALSE(tsfuse::SnapshotWrittenOperands(g));  // idempotent
}

// Named negative: a write before the op, and an operand nothing writes.
TEST(SnapshotWrittenOperandsIR, OperandsWrittenOnlyBeforeTheOpAreReadAsTheyAre) {
  auto g = graphOf(R"IR(
  %w : Tensor = aten::mul_(%b, %ftwo)
  %s : Tensor = aten::sub(%a, %b, %one)
  %d : Tensor = aten::abs(%s)
  %r : Tensor = aten::sum(%d, %dims1, %false, %none)
  return (%r, %w)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check_not("tsfuse::saved_operand")->check("tsfuse::reduce"); }))
      << r.ir;
  EXPECT_TRUE(sameOutputs(ref, g, inputs(2)));
}

// A write earlier in a loop's body comes after the op on the next pass through it.
TEST(SnapshotWrittenOperandsIR, AWriteInTheLoopHoldingTheOpIsAfterIt) {
  auto g = graphOf(R"IR(
  %z : Tensor = aten::mul(%a, %ftwo)
  %out : Tensor = prim::Loop(%three, %true, %z)
    block0(%i : int, %acc : Tensor):
      %w : Tensor = aten::mul_(%b, %ftwo)
      %s : Tensor = aten::sub(%a, %b, %one)
      %d : Tensor = aten::abs(%s)
      %r : Tensor = aten::sum(%d, %dims1, %false, %none)
      %e : Tensor = aten::add(%r, %acc, %one)
      -> (%true, %e)
  return (%out)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) { fc.check("tsfuse::saved_operand(%b, ")->check("tsfuse::reduce"); }))
      << r.ir;
  EXPECT_TRUE(sameOutputs(ref, g, inputs(3)));
}

}  // namespace

}  // namespace ir_snapshot_written_operands_test
