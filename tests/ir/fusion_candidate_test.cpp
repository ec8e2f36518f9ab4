// IR-string tests of firstFusionCandidate (passes/analysis/op_table.h): which executor graphs are fused on
// their first call. Positives: the shapes every fused region has (two elementwise ops meeting,
// through views and tuples too; an elementwise value reduced, even if it is also returned; one an
// in-place op writes). Named negatives: what real classifiers hold and the pipeline never fuses
// (a lone op; an elementwise value that something else also reads, e.g. ViT's residual add read
// by layer_norm and by the next add). Each case also says what the pipeline does, so the
// heuristic and the passes cannot drift apart unnoticed.
#include "ir_util.h"

#include "passes/analysis/op_table.h"
#include "passes/analysis/region_starts.h"
#include "registration/pipeline.h"

namespace ir_fusion_candidate_test {

namespace {

using namespace tsfuse_test;
using torch::jit::Node;

const char* candidateKind(const std::shared_ptr<Graph>& g) {
  const Node* n = tsfuse::firstFusionCandidate(g->block());
  return n ? n->kind().toQualString() : "none";
}

// How many tsfuse:: ops the whole pipeline leaves in a copy of `g`.
int fusedOps(const std::shared_ptr<Graph>& g) {
  std::shared_ptr<Graph> copy = g->copy();
  tsfuse::runPipeline(copy, tsfuse::PipelineOptions{}, nullptr, "test");
  int n = 0;
  for (const Node* node : copy->nodes()) n += std::string(node->kind().ns().toUnqualString()) == "tsfuse";
  return n;
}

struct Case {
  const char* name;
  const char* body;
  const char* candidate;  // the node kind firstFusionCandidate returns, or "none"
};

const Case kCases[] = {
    {"TwoElementwiseOpsMeet", R"IR(
  %d : Tensor = aten::sub(%x, %y, %one)
  %a : Tensor = aten::abs(%d)
  return (%a))IR",
     "aten::sub"},
    {"ThroughASelect", R"IR(
  %d : Tensor = aten::sub(%x, %y, %one)
  %c : Tensor = aten::clamp(%d, %zero, %none)
  %c0 : Tensor = aten::select(%c, %m1, %zero)
  %c1 : Tensor = aten::select(%c, %m1, %one)
  %p : Tensor = aten::mul(%c0, %c1)
  return (%p))IR",
     "aten::sub"},
    {"ThroughATuple", R"IR(
  %d : Tensor = aten::sub(%x, %y, %one)
  %t : (Tensor, Tensor) = prim::TupleConstruct(%d, %x)
  %d2 : Tensor, %x2 : Tensor = prim::TupleUnpack(%t)
  %a : Tensor = aten::abs(%d2)
  return (%a))IR",
     "aten::sub"},
    {"Reduced", R"IR(
  %d : Tensor = aten::sub(%x, %y, %one)
  %s : Tensor = aten::sum(%d, %dims1, %false, %none)
  return (%s))IR",
     "aten::sub"},
    {"ReducedSizesRead", R"IR(
  %d : Tensor = aten::sub(%x, %y, %one)
  %n : int = aten::numel(%d)
  %s : Tensor = aten::sum(%d, %dims1, %false, %none)
  return (%s, %n))IR",
     "aten::sub"},
    {"WrittenInPlace", R"IR(
  %d : Tensor = aten::sub(%x, %y, %one)
  %w : Tensor = aten::abs_(%d)
  return (%d))IR",
     "aten::sub"},
    {"MapSizesRead", R"IR(
  %d : Tensor = aten::sub(%x, %y, %one)
  %n : int = aten::numel(%d)
  %a : Tensor = aten::abs(%d)
  return (%a, %n))IR",
     "aten::sub"},  // numel reads tsfuse::shape_of: %d is not stored
    {"ReducedAndReturned", R"IR(
  %d : Tensor = aten::sub(%x, %y, %one)
  %s : Tensor = aten::sum(%d, %dims1, %false, %none)
  return (%s, %d))IR",
     "none"},
    {"LoneOp", R"IR(
  %d : Tensor = aten::sub(%x, %y, %one)
  %m : Tensor = aten::mm(%d, %y)
  return (%m))IR",
     "none"},
    {"ValueSomethingElseReads", R"IR(
  %r : Tensor = aten::add(%x, %y, %one)
  %h : Tensor = aten::mm(%r, %y)
  %o : Tensor = aten::add(%r, %h, %one)
  return (%o))IR",
     "none"},
    {"ReturnedAndReadElementwise", R"IR(
  %d : Tensor = aten::sub(%x, %y, %one)
  %a : Tensor = aten::abs(%d)
  %m : Tensor = aten::mm(%a, %y)
  return (%m, %d))IR",
     "none"},
};

class FusionCandidateIR : public ::testing::TestWithParam<Case> {};

TEST_P(FusionCandidateIR, AgreesWithThePipeline) {
  const Case& c = GetParam();
  auto g = graphWithConstants("%x : Tensor, %y : Tensor", c.body);
  EXPECT_STREQ(candidateKind(g), c.candidate);
  // A graph without a candidate is one the pipeline fuses nothing in (the executor keeps its
  // profiled first call for nothing); one with a candidate is fused.
  if (std::string(c.candidate) == "none")
    EXPECT_EQ(fusedOps(g), 0);
  else
    EXPECT_GT(fusedOps(g), 0);
}

INSTANTIATE_TEST_SUITE_P(Cases, FusionCandidateIR, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace

}  // namespace ir_fusion_candidate_test
