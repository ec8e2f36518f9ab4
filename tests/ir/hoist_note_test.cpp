// The region's notes say where the CPU may hoist costly per-operand work at run time
// (kernels/runtime/hoist.h): the decision depends on the call's sizes, so the graph cannot show it, and
// --explain and the viewer print these notes.
#include "ir_util.h"

namespace ir_hoist_note_test {

namespace {

using namespace tsfuse_test;

// complete IoU's aspect-ratio term: atan(w / h) of each box of one side, against every box of the
// other. The atan reads the per-box operands only: noted. The final atan reads everything: not.
TEST(HoistNoteIR, CostlyWorkOverSomeOperandsIsNoted) {
  auto g = graphWithConstants("%w : Tensor, %h : Tensor, %a : Tensor", R"IR(
  %r : Tensor = aten::div(%w, %h)
  %t : Tensor = aten::atan(%r)
  %tu : Tensor = aten::unsqueeze(%t, %zero)
  %au : Tensor = aten::unsqueeze(%a, %one)
  %d : Tensor = aten::sub(%au, %tu, %one)
  %e : Tensor = aten::atan(%d)
  %o : Tensor = aten::mul(%e, %d)
  return (%o)
)IR",
                              "", /*named=*/true);
  PassRun r = runPipelineOn(g);
  ASSERT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.ir;
  const std::string dump = r.dump();
  EXPECT_NE(dump.find("atan reads %w, %h only: on the CPU it runs once at their shape"), std::string::npos) << dump;
  EXPECT_EQ(dump.find("atan reads %w, %h, %a"), std::string::npos) << dump;
}

// Cheap work over some operands (a division) is not noted: the compiled code computes it per
// value as cheaply as it would read a stored value.
TEST(HoistNoteIR, CheapWorkIsNotNoted) {
  auto g = graphWithConstants("%w : Tensor, %h : Tensor, %a : Tensor", R"IR(
  %r : Tensor = aten::div(%w, %h)
  %ru : Tensor = aten::unsqueeze(%r, %zero)
  %au : Tensor = aten::unsqueeze(%a, %one)
  %d : Tensor = aten::sub(%au, %ru, %one)
  %o : Tensor = aten::abs(%d)
  return (%o)
)IR",
                              "", /*named=*/true);
  PassRun r = runPipelineOn(g);
  ASSERT_EQ(findNodes(g, "tsfuse::pairwise").size(), 1u) << r.ir;
  EXPECT_EQ(r.dump().find("only: on the CPU it runs once"), std::string::npos) << r.dump();
}

}  // namespace

}  // namespace ir_hoist_note_test
