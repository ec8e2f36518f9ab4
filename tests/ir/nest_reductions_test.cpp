// IR-string tests of nest_reductions (passes/nest_reductions.cpp): a reduction of a fused
// reduction's value becomes one tsfuse::reduce_chain (the Gaussian kernel sum, nearest neighbour,
// max with indices), several of them one tsfuse::reduce_sweep (Chamfer's two minima), a softmax
// of it or a division by its sum the chain's last stage (soft assignment), with named negative
// cases. Each rewritten graph computes what the original does.
#include "ir_util.h"

#include "passes/fuse_broadcast_reduce.h"
#include "passes/nest_reductions.h"

namespace ir_nest_reductions_test {

namespace {

using namespace tsfuse_test;

// graph(%x [N, 1, D], %y [M, D], %b [M]): the squared differences %sq [N, M, D] and their sum
// over D, %d [N, M], then `body`.
std::shared_ptr<Graph> distances(const std::string& body) {
  return squaredDistancesThen(body, R"IR(
  %dims0 : int[] = prim::Constant[value=[0]]()
  %mtwo : float = prim::Constant[value=-2.]()
  %f64 : int = prim::Constant[value=7]()
)IR");
}

std::vector<c10::IValue> points(uint64_t seed, at::ScalarType t = at::kFloat) {
  Gen g(seed);
  return {g.tensor({9, 1, 3}, t), g.tensor({7, 3}, t), g.tensor({7}, t)};
}

struct Nested {
  std::shared_ptr<Graph> g, ref;
  PassRun reduce, nest;
};

Nested nest(const std::string& body) {
  Nested n;
  n.g = distances(body);
  n.ref = n.g->copy();
  n.reduce = runPass(n.g, tsfuse::FuseBroadcastReduce);
  n.nest = runPass(n.g, tsfuse::NestReductions);
  return n;
}

std::vector<std::string> stagesOf(torch::jit::Node* n) {
  std::vector<std::string> out;
  for (const auto& s : constInput(n, 2).toListRef()) out.push_back(s.toStringRef());
  return out;
}

TEST(NestReductionsIR, GaussianKernelSumIsOneChainWithBothEpilogues) {
  Nested n = nest(R"IR(
  %e : Tensor = aten::mul(%d, %mtwo)
  %k : Tensor = aten::exp(%e)
  %kb : Tensor = aten::mul(%k, %b)
  %r : Tensor = aten::sum(%kb, %dims1, %false, %none)
  %r2 : Tensor = aten::mul(%r, %r)
  return (%r2)
)IR");
  ASSERT_EQ(n.nest.rewrites(), 1) << n.reduce.dump() << n.nest.dump();
  EXPECT_TRUE(fileCheck(n.nest.ir, [](FileCheck& fc) {
    fc.check_count("tsfuse::reduce_chain", 1, true)
        ->check_not("tsfuse::reduce(")
        ->check_not("aten::sum")
        ->check_not("aten::mul");
  }));
  auto c = findNodes(n.g, "tsfuse::reduce_chain");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(exprOf(c[0]), "v1: sub($0, $1); mul(%0, %0)");
  EXPECT_EQ(stagesOf(c[0]),
            (std::vector<std::string>{"sum(dim=[-1], keepdim=False) |> v1: mul($0, -2.0); exp(%0); mul(%1, $1)",
                                      "sum(dim=[1], keepdim=False) |> v1: mul($0, $0)"}));
  EXPECT_NE(n.nest.firstRewrite()->reason.find("never stored"), std::string::npos);
  EXPECT_TRUE(sameOutputs(n.ref, n.g, points(1), /*exact=*/false));
  EXPECT_TRUE(sameOutputs(n.ref, n.g, points(2, at::kDouble), /*exact=*/false));
}

TEST(NestReductionsIR, NearestNeighbourArgminIsOneChain) {
  Nested n = nest(R"IR(
  %i : Tensor = aten::argmin(%d, %one, %false)
  return (%i)
)IR");
  ASSERT_EQ(n.nest.rewrites(), 1) << n.nest.dump();
  auto c = findNodes(n.g, "tsfuse::reduce_chain");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(stagesOf(c[0]).back(), "argmin(dim=[1], keepdim=False)");
  EXPECT_TRUE(sameOutputs(n.ref, n.g, points(3, at::kInt)));  // exact, ties included
  EXPECT_TRUE(sameOutputs(n.ref, n.g, points(4)));
}

// kmeans-pytorch's assignment, traced: torch.argmin(((A - B) ** 2).sum(-1).squeeze(), dim=1).
TEST(NestReductionsIR, ASqueezeBetweenTheReductionsJoinsTheChain) {
  Nested n = nest(R"IR(
  %q : Tensor = aten::squeeze(%d)
  %i : Tensor = aten::argmin(%q, %one, %false)
  return (%i)
)IR");
  ASSERT_EQ(n.nest.rewrites(), 1) << n.nest.dump();
  EXPECT_TRUE(
      fileCheck(n.nest.ir, [](FileCheck& fc) { fc.check("tsfuse::reduce_chain")->check_not("aten::squeeze"); }));
  auto c = findNodes(n.g, "tsfuse::reduce_chain");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(stagesOf(c[0]).back(), "squeeze() |> argmin(dim=[1], keepdim=False)");
  EXPECT_TRUE(sameOutputs(n.ref, n.g, points(9)));
}

TEST(NestReductionsIR, MaxWithIndicesIsAChainWithTwoOutputs) {
  Nested n = nest(R"IR(
  %v : Tensor, %i : Tensor = aten::max(%d, %zero, %true)
  return (%v, %i)
)IR");
  ASSERT_EQ(n.nest.rewrites(), 1) << n.nest.dump();
  EXPECT_EQ(n.nest.firstRewrite()->fusedOp, "tsfuse::reduce_chain_with_indices");
  EXPECT_TRUE(fileCheck(n.nest.ir, [](FileCheck& fc) {
    fc.check("tsfuse::reduce_chain_with_indices")->check_not("aten::max")->check_not("tsfuse::reduce(");
  }));
  EXPECT_TRUE(sameOutputs(n.ref, n.g, points(5, at::kInt)));
}

TEST(NestReductionsIR, ChamfersTwoMinimaAreOneSweep) {
  Nested n = nest(R"IR(
  %r : Tensor = aten::amin(%d, %dims1, %false)
  %c : Tensor = aten::amin(%d, %dims0, %false)
  return (%r, %c)
)IR");
  ASSERT_EQ(n.nest.rewrites(), 1) << n.nest.dump();
  EXPECT_EQ(n.nest.firstRewrite()->fusedOp, "tsfuse::reduce_sweep");
  EXPECT_TRUE(fileCheck(n.nest.ir, [](FileCheck& fc) {
    fc.check_count("tsfuse::reduce_sweep", 1, true)
        ->check("prim::ListUnpack")
        ->check_not("aten::amin")
        ->check_not("tsfuse::reduce(");
  }));
  auto sw = findNodes(n.g, "tsfuse::reduce_sweep");
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(stagesOf(sw[0]), (std::vector<std::string>{"sum(dim=[-1], keepdim=False)", "amin(dim=[1], keepdim=False)",
                                                       "amin(dim=[0], keepdim=False)"}));
  EXPECT_TRUE(sameOutputs(n.ref, n.g, points(6, at::kInt)));
  EXPECT_TRUE(sameOutputs(n.ref, n.g, points(10), /*exact=*/false));
}

TEST(NestReductionsIR, ReductionsWithIndicesOfOneValueEachGetAChain) {
  Nested n = nest(R"IR(
  %v : Tensor, %i : Tensor = aten::min(%d, %one, %false)
  %c : Tensor = aten::amin(%d, %dims0, %false)
  return (%v, %i, %c)
)IR");
  ASSERT_EQ(n.nest.rewrites(), 2) << n.nest.dump();
  EXPECT_NE(n.nest.firstRewrite()->reason.find("recomputed for each of the 2 reductions"), std::string::npos)
      << n.nest.dump();
  EXPECT_EQ(findNodes(n.g, "tsfuse::reduce_chain_with_indices").size(), 1u);
  EXPECT_EQ(findNodes(n.g, "tsfuse::reduce_chain").size(), 1u);
  EXPECT_TRUE(findNodes(n.g, "tsfuse::reduce").empty()) << n.nest.ir;
  EXPECT_TRUE(sameOutputs(n.ref, n.g, points(11, at::kInt)));
}

// Found by the fuzzer (seed 7, program 834): two reductions of a chain's value are two longer
// chains; a sweep's branches read stage 0's value, not a later stage's.
TEST(NestReductionsIR, TwoReductionsOfAChainsValueAreTwoChains) {
  auto g = distances(R"IR(
  %a : Tensor = aten::amax(%d, %dims1, %true)
  %p : Tensor = aten::amin(%a, %dims0, %false)
  %q : Tensor = aten::amax(%a, %dims0, %false)
  return (%p, %q)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(findNodes(g, "tsfuse::reduce_sweep").empty()) << r.dump();
  auto c = findNodes(g, "tsfuse::reduce_chain");
  ASSERT_EQ(c.size(), 2u) << r.dump();
  for (auto* n : c) EXPECT_EQ(stagesOf(n).size(), 3u) << r.ir;
  EXPECT_TRUE(sameOutputs(ref, g, points(12, at::kInt)));
}

TEST(NestReductionsIR, AMeanOverEveryDimFoldsInAOneBranchSweep) {
  // An MMD term: the kernel values' mean. Its slab sums fold (kernels/runtime/sweep.h).
  Nested n = nest(R"IR(
  %e : Tensor = aten::mul(%d, %mtwo)
  %k : Tensor = aten::exp(%e)
  %m : Tensor = aten::mean(%k, %none)
  return (%m)
)IR");
  ASSERT_EQ(n.nest.rewrites(), 1) << n.reduce.dump() << n.nest.dump();
  auto s = findNodes(n.g, "tsfuse::reduce_sweep");
  ASSERT_EQ(s.size(), 1u) << n.nest.ir;
  EXPECT_EQ(stagesOf(s[0]).back(), "mean(dim=None, keepdim=False)");
  EXPECT_TRUE(findNodes(n.g, "tsfuse::reduce").empty()) << n.nest.ir;
  EXPECT_NE(n.nest.firstRewrite()->reason.find("folds the slab partials"), std::string::npos);
  EXPECT_TRUE(sameOutputs(n.ref, n.g, points(13), /*exact=*/false));
}

TEST(NestReductionsIR, AProductOverEveryDimIsNotNested) {
  Nested n = nest(R"IR(
  %m : Tensor = aten::prod(%d, %none)
  return (%m)
)IR");
  EXPECT_EQ(n.nest.rewrites(), 0) << n.nest.dump();
  EXPECT_TRUE(n.nest.rejectedWith("reduces every dim of the fused reduction's value")) << n.nest.dump();
  EXPECT_TRUE(n.nest.rejectedWith("do not fold")) << n.nest.dump();
  EXPECT_EQ(findNodes(n.g, "tsfuse::reduce").size(), 1u);
}

TEST(NestReductionsIR, AValueAlsoUsedElsewhereIsNotNested) {
  Nested n = nest(R"IR(
  %i : Tensor = aten::argmin(%d, %one, %false)
  return (%i, %d)
)IR");
  EXPECT_EQ(n.nest.rewrites(), 0) << n.nest.dump();
  EXPECT_TRUE(n.nest.rejectedWith("is also used by")) << n.nest.dump();
}

TEST(NestReductionsIR, AWriteToAnOperandInBetweenIsNotNested) {
  Nested n = nest(R"IR(
  %w : Tensor = aten::add_(%y, %one, %one)
  %i : Tensor = aten::argmin(%d, %one, %false)
  return (%i)
)IR");
  EXPECT_EQ(n.nest.rewrites(), 0) << n.nest.dump();
  EXPECT_TRUE(n.nest.rejectedWith("written by an in-place op")) << n.nest.dump();
  EXPECT_TRUE(sameOutputs(n.ref, n.g, points(7)));
}

TEST(NestReductionsIR, ThePipelineNestsAndTheChainGrowsAThirdStage) {
  auto g = distances(R"IR(
  %a : Tensor = aten::amax(%d, %dims1, %true)
  %s : Tensor = aten::sum(%a, %dims0, %false, %none)
  return (%s)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  auto c = findNodes(g, "tsfuse::reduce_chain");
  ASSERT_EQ(c.size(), 1u) << r.dump();
  EXPECT_EQ(stagesOf(c[0]).size(), 3u) << r.ir;
  EXPECT_TRUE(sameOutputs(ref, g, points(8, at::kInt)));
}

// Soft assignment: softmax(-2 * |x_i - y_j|^2, dim=1), and log_softmax over the other dim.
TEST(NestReductionsIR, ASoftmaxOfTheValueIsTheChainsLastStage) {
  for (const char* kind : {"aten::softmax", "aten::log_softmax"}) {
    const bool log = std::string(kind) == "aten::log_softmax";
    Nested n = nest(std::string("  %e : Tensor = aten::mul(%d, %mtwo)\n  %s : Tensor = ") + kind + "(%e, " +
                    (log ? "%zero" : "%one") + ", %none)\n  return (%s)\n");
    ASSERT_EQ(n.nest.rewrites(), 1) << n.reduce.dump() << n.nest.dump();
    EXPECT_EQ(n.nest.firstRewrite()->fusedOp, "tsfuse::reduce_chain");
    EXPECT_NE(n.nest.firstRewrite()->reason.find("normalized by ATen's ops, never stored"), std::string::npos);
    EXPECT_TRUE(fileCheck(n.nest.ir, [&](FileCheck& fc) {
      fc.check_count("tsfuse::reduce_chain", 1, true)->check_not("tsfuse::reduce(")->check_not(kind);
    }));
    auto c = findNodes(n.g, "tsfuse::reduce_chain");
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(stagesOf(c[0]), (std::vector<std::string>{"sum(dim=[-1], keepdim=False) |> v1: mul($0, -2.0)",
                                                        log ? "log_softmax(dim=0)" : "softmax(dim=1)"}));
    EXPECT_TRUE(sameOutputs(n.ref, n.g, points(21)));  // bit for bit
    EXPECT_TRUE(sameOutputs(n.ref, n.g, points(22, at::kDouble)));
  }
}

// A reduction of the softmax's value nests after it: the chain's third stage.
TEST(NestReductionsIR, AReductionAfterTheSoftmaxIsAThirdStage) {
  auto g = distances(R"IR(
  %s : Tensor = aten::softmax(%d, %one, %none)
  %i : Tensor = aten::argmax(%s, %zero, %false)
  return (%i)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  auto c = findNodes(g, "tsfuse::reduce_chain");
  ASSERT_EQ(c.size(), 1u) << r.dump();
  EXPECT_EQ(stagesOf(c[0]), (std::vector<std::string>{"sum(dim=[-1], keepdim=False)", "softmax(dim=1)",
                                                      "argmax(dim=[0], keepdim=False)"}));
  EXPECT_TRUE(sameOutputs(ref, g, points(23)));
}

TEST(NestReductionsIR, ASoftmaxWithADtypeOrOfAValueReadElsewhereIsNotNested) {
  Nested dtype = nest(R"IR(
  %s : Tensor = aten::softmax(%d, %one, %f64)
  return (%s)
)IR");
  EXPECT_EQ(dtype.nest.rewrites(), 0) << dtype.nest.dump();
  EXPECT_TRUE(dtype.nest.rejectedWith("a dtype argument")) << dtype.nest.dump();
  Nested shared = nest(R"IR(
  %s : Tensor = aten::log_softmax(%d, %one, %none)
  return (%s, %d)
)IR");
  EXPECT_EQ(shared.nest.rewrites(), 0) << shared.nest.dump();
  EXPECT_TRUE(shared.nest.rejectedWith("also used elsewhere, so it is stored anyway")) << shared.nest.dump();
  EXPECT_TRUE(sameOutputs(shared.ref, shared.g, points(24)));
}

// DEC's Student-t assignment, and a softmax written out: q / q.sum(1, keepdim=True).
TEST(NestReductionsIR, ADivisionByTheValuesSumIsTheChainsLastStage) {
  Nested n = nest(R"IR(
  %e : Tensor = aten::mul(%d, %mtwo)
  %k : Tensor = aten::exp(%e)
  %s : Tensor = aten::sum(%k, %dims1, %true, %none)
  %r : Tensor = aten::div(%k, %s)
  return (%r)
)IR");
  ASSERT_EQ(n.nest.rewrites(), 1) << n.reduce.dump() << n.nest.dump();
  EXPECT_TRUE(fileCheck(n.nest.ir, [](FileCheck& fc) {
    fc.check_count("tsfuse::reduce_chain", 1, true)
        ->check_not("aten::sum")
        ->check_not("aten::div")
        ->check_not("tsfuse::reduce(");
  }));
  auto c = findNodes(n.g, "tsfuse::reduce_chain");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(stagesOf(c[0]),
            (std::vector<std::string>{"sum(dim=[-1], keepdim=False) |> v1: mul($0, -2.0); exp(%0)", "div_sum(dim=1)"}));
  EXPECT_TRUE(sameOutputs(n.ref, n.g, points(25)));  // bit for bit
  EXPECT_TRUE(sameOutputs(n.ref, n.g, points(26, at::kDouble)));
}

// Without keepdim the sum broadcasts against the value's last dim instead: not this form; the
// value has another reader, so it is stored.
TEST(NestReductionsIR, ADivisionByASumWithoutKeepdimIsNotNested) {
  Nested n = nest(R"IR(
  %s : Tensor = aten::sum(%d, %dims1, %false, %none)
  %r : Tensor = aten::div(%d, %s)
  return (%r)
)IR");
  EXPECT_EQ(n.nest.rewrites(), 0) << n.nest.dump();
  EXPECT_TRUE(n.nest.rejectedWith("is also used by")) << n.nest.dump();
}

}  // namespace

}  // namespace ir_nest_reductions_test
