// Fused later stages of tsfuse::reduce_chain (kernels/runtime/chain.h): an elementwise expression over the
// previous stage's value (unsqueezed first where the stage says so) and operands of its own,
// reduced by the fused kernel slab by slab. Each chain is checked against the same computation
// unchained (stage 0 as tsfuse::reduce, then the fused stage as tsfuse::reduce over the stored
// value): bit for bit, whatever the number of slabs and their threads; against the reference
// (evalChain, ATen) within the rounding of stage 0's float sum. Then operands
// that vary along the slab dim, eager's own errors, text round trips and malformed texts.
#include "chain_util.h"

#include <atomic>
#include <thread>

namespace ops_chain_fused_stage_test {

namespace {

using tsfuse_test::chained;
using tsfuse_test::errorOf;
using tsfuse_test::Gen;
using tsfuse_test::sameAll;
using tsfuse_test::sameTensor;

class ChainFusedStage : public tsfuse_test::ManySlabs {};

const std::string kSq = "v1: sub($0, $1); mul(%0, %0)";
const std::string kGauss = "sum(dim=[2], keepdim=False) |> v1: mul($0, -2.0); exp(%0)";

// The chain unchained: stage 0 as tsfuse::reduce, each later stage as the fused op it was.
std::vector<at::Tensor> unchained(const std::vector<at::Tensor>& ops, const std::vector<std::string>& stages) {
  const tsfuse::Chain c = tsfuse::Chain::parse(kSq, stages);
  auto reduceOf = [](const tsfuse::ReduceSpec& s, at::TensorList in,
                     const std::string& expr) -> std::vector<at::Tensor> {
    if (s.withIndices()) {
      auto [v, i] = tsfuse::reduceWithIndices(in, expr, tsfuse::reductionText(s), (*s.dims)[0], s.keepdim);
      return {v, i};
    }
    std::optional<std::string> epi;
    if (s.epilogue) epi = s.epilogue->str();
    return {tsfuse::reduce(in, expr, tsfuse::reductionText(s), s.dims, s.keepdim, s.dtype, epi)};
  };
  const at::TensorList all(ops);
  std::vector<at::Tensor> out = reduceOf(c.stages[0], all.slice(0, c.firstOperand[1]), kSq);
  for (size_t k = 1; k < c.stages.size(); ++k) {
    const tsfuse::StageInput& in = *c.input[k];
    out = reduceOf(c.stages[k], in.operands(out[0], c.inputOperands(all, k), c.epilogueOperands(all, k)), in.text);
  }
  return out;
}

// A later stage and its operands' shapes: sizes, with 0 standing for n, -1 for m and -2 for k.
struct Case {
  const char* name;
  std::string stage;
  std::vector<std::vector<int64_t>> later;
};

const std::vector<Case> kCases = {
    {"kernel product, weights [1, M, K]",
     "fused(v1: mul($0, $1); $0 = value.unsqueeze(2)) |> sum(dim=[1], keepdim=False)",
     {{1, -1, -2}}},
    {"kernel product, weights [M, K], unsqueezed twice",
     "fused(v1: mul($0, $1); $0 = value.unsqueeze(-1).unsqueeze(0)) |> sum(dim=[2], keepdim=False)",
     {{-1, -2}}},
    {"per-row weights [N, M, K]",
     "fused(v1: mul($1, $0); $1 = value.unsqueeze(2)) |> sum(dim=[1], keepdim=True)",
     {{0, -1, -2}}},
    {"value as $1, an epilogue operand",
     "fused(v1: sub($0, $1); abs(%0); $1 = value) |> amax(dim=[1], keepdim=False) |> v1: add($0, $1)",
     {{-1}, {0}}},
    // a sibling: stage 0's value read by the epilogue, beside an operand of the epilogue's own
    {"value in the epilogue of a product over [N, M, K]",
     "fused(v1: sub($0, $1); abs(%0); $2 = value) |> prod(dim=[2], keepdim=False) |> v1: mul($0, $1); add(%0, $2)",
     {{0, 1, -2}, {-1, -2}, {-1}}},
    {"value unsqueezed in the epilogue of a kept sum",
     "fused(v1: mul($0, $1); $3 = value.unsqueeze(2)) |> sum(dim=[2], keepdim=True) |> v1: sub($1, $0); mul(%0, $2)",
     {{0, 1, -2}, {-1, -2}, {0, 1, 1}}},
    {"max with indices last", "fused(v1: mul($0, $1); $0 = value) |> max(dim=[1], keepdim=False)", {{-1}}},
    {"argmin of a weighted value over [N, M]",
     "fused(v1: mul($0, $1); $0 = value) |> argmin(dim=[1], keepdim=False)",
     {{-1}}},
    // along dim -1: the stage's value on the slab, then the row-extremum pass (laterStage)
    {"max with indices along the last dim",
     "fused(v1: sub($0, $1); $0 = value) |> max(dim=[-1], keepdim=False)",
     {{-1}}},
    {"argmax along the last dim, kept",
     "fused(v1: mul($0, $1); $0 = value) |> argmax(dim=[-1], keepdim=True)",
     {{0, 1}}},
};

std::vector<at::Tensor> operands(Gen& g, const Case& c, int64_t n, int64_t m, int64_t k, int64_t d, at::ScalarType dt) {
  std::vector<at::Tensor> ops{g.tensor({n, 1, d}, dt), g.tensor({m, d}, dt)};
  for (const auto& shape : c.later) {
    std::vector<int64_t> s;
    for (int64_t v : shape) s.push_back(v == 0 ? n : v == -1 ? m : v == -2 ? k : v);
    ops.push_back(g.tensor(s, dt));
  }
  return ops;
}

TEST_F(ChainFusedStage, ManySlabsGiveTheUnchainedBitsAndTheReferencesValues) {
  Gen g(41);
  for (int i = 0; i < 60; ++i) {
    const Case& c = kCases[i % kCases.size()];
    const int64_t n = 1 + g.randint(0, 30), m = 1 + g.randint(0, 25), k = 1 + g.randint(0, 17), d = 1 + g.randint(0, 5);
    const at::ScalarType dt = i % 4 == 3 ? at::kDouble : at::kFloat;
    std::vector<at::Tensor> ops = operands(g, c, n, m, k, d, dt);
    if (i % 5 == 2 && ops[2].dim() >= 2)
      ops[2] = ops[2].transpose(-1, -2).contiguous().transpose(-1, -2);  // another layout
    const std::vector<std::string> stages{kGauss, c.stage};
    const std::string what = std::string(c.name) + " #" + std::to_string(i);
    std::vector<at::Tensor> got = chained(ops, kSq, stages);
    ASSERT_TRUE(sameAll(unchained(ops, stages), got, /*exact=*/true)) << what;
    // Stage 0's float sum over D is folded in the fused kernel's order: values within its rounding
    // (indices could then differ on near ties; they are compared with the unchained ones above).
    const auto ref = tsfuse::evalChain(tsfuse::Chain::parse(kSq, stages), ops);
    ASSERT_TRUE(sameTensor(ref[0], got[0], /*exact=*/false)) << what;
  }
}

// Slabs in parallel, each fused stage single-threaded inside its slab; unchained, the fused stage
// runs over the whole value, multi-threaded: the same bits.
TEST_F(ChainFusedStage, ParallelSlabsOfALargeCallGiveTheUnchainedBits) {
  tsfuse::setChainSlabElements(4096);
  Gen g(43);
  for (const Case& c : kCases) {
    std::vector<at::Tensor> ops = operands(g, c, 300, 211, 16, 3, at::kFloat);
    const std::vector<std::string> stages{kGauss, c.stage};
    const auto want = unchained(ops, stages);
    const auto got = chained(ops, kSq, stages);  // (its own statement: lastPath is the chain's)
    EXPECT_STREQ(tsfuse::lastPath(), "native") << c.name;
    EXPECT_TRUE(sameAll(want, got, /*exact=*/true)) << c.name;
  }
}

TEST_F(ChainFusedStage, TextsRoundTrip) {
  for (const Case& c : kCases) {
    const std::vector<std::string> stages{kGauss, c.stage};
    EXPECT_EQ(tsfuse::Chain::parse(kSq, stages).stageTexts(), stages);
  }
}

TEST_F(ChainFusedStage, EagersOwnErrors) {
  Gen g(44);
  at::Tensor x = g.tensor({40, 1, 3}, at::kFloat), y = g.tensor({30, 3}, at::kFloat);
  const std::vector<std::string> stages{kGauss, kCases[0].stage};
  // Weights whose M does not match: the message names the whole value's sizes, not a slab's.
  at::Tensor bad = g.tensor({1, 29, 4}, at::kFloat);
  const std::string want = errorOf([&] { at::mul(at::randn({40, 30, 1}), bad); });
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(errorOf([&] { tsfuse::reduceChain({x, y, bad}, kSq, stages); }), want);
  // A fused stage's dim out of range.
  const std::vector<std::string> far{kGauss, "fused(v1: mul($0, $1); $0 = value) |> sum(dim=[4], keepdim=False)"};
  at::Tensor w = g.tensor({30}, at::kFloat);
  const std::string wantFar = errorOf([&] { at::sum(at::randn({40, 30}), {4}); });
  EXPECT_FALSE(wantFar.empty());
  EXPECT_EQ(errorOf([&] { tsfuse::reduceChain({x, y, w}, kSq, far); }), wantFar);
}

TEST_F(ChainFusedStage, MalformedTextsAreRejected) {
  at::Tensor x = at::randn({6, 1, 3}), y = at::randn({5, 3}), b = at::randn({1, 5, 2});
  auto reason = [&](const std::string& stage) {
    return errorOf([&] { tsfuse::reduceChain({x, y, b}, kSq, {kGauss, stage}); });
  };
  EXPECT_NE(reason("fused(v1: mul($0, $1)) |> sum(dim=[1], keepdim=False)").find("expected '; $<i> = value'"),
            std::string::npos);
  EXPECT_NE(reason("fused(v1: mul($0, $1); $3 = value) |> sum(dim=[1], keepdim=False) |> v1: add($0, $1)")
                .find("not an operand of the expression or its epilogue"),
            std::string::npos);
  EXPECT_NE(reason("fused(v1: mul($0, $1); $2 = value) |> sum(dim=[1], keepdim=False)").find("not an operand"),
            std::string::npos);
  EXPECT_NE(reason("fused(v1: mul($0, $1); $0 = value.view(2)) |> sum(dim=[1], keepdim=False)").find("unexpected text"),
            std::string::npos);
  EXPECT_NE(reason("fused(v1: mul($0, $1); $0 = value").find("expected 'fused("), std::string::npos);
  EXPECT_NE(reason("fused(v1: frob($0, $1); $0 = value) |> sum(dim=[1], keepdim=False)").find("stage 1"),
            std::string::npos);
}

TEST_F(ChainFusedStage, AutogradAndMetaRunTheReference) {
  at::Tensor x = at::randn({6, 1, 3}).requires_grad_(), y = at::randn({5, 3}), b = at::randn({1, 5, 2});
  const std::vector<std::string> stages{kGauss, kCases[0].stage};
  at::Tensor got = tsfuse::reduceChain({x, y, b}, kSq, stages);
  EXPECT_STREQ(tsfuse::lastPath(), "eager");
  got.sum().backward();
  at::Tensor x2 = x.detach().clone().requires_grad_();
  (at::exp(((x2 - y) * (x2 - y)).sum(2) * -2.0).unsqueeze(2) * b).sum(1).sum().backward();
  EXPECT_TRUE(at::allclose(x.grad(), x2.grad()));
  at::Tensor meta = tsfuse::reduceChain({x.to(at::kMeta), y.to(at::kMeta), b.to(at::kMeta)}, kSq, stages);
  EXPECT_EQ(meta.sizes(), at::IntArrayRef({6, 2}));
}

}  // namespace

namespace {

// A device's slabs run on the calling thread, in one run (its current stream is the caller's);
// a CPU call's on torch's threads, every slab once.
TEST(ChainSlabs, DeviceSlabsRunOnTheCallingThread) {
  std::vector<std::pair<int64_t, int64_t>> runs;
  std::thread::id who;
  tsfuse::forLaterSlabs(c10::Device(c10::kCUDA, 0), 7, [&](int64_t b, int64_t e) {
    runs.emplace_back(b, e);
    who = std::this_thread::get_id();
  });
  EXPECT_EQ(runs, (std::vector<std::pair<int64_t, int64_t>>{{1, 7}}));
  EXPECT_EQ(who, std::this_thread::get_id());
  std::vector<std::atomic<int>> seen(40);
  tsfuse::forLaterSlabs(c10::kCPU, 40, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++seen[static_cast<size_t>(i)];
  });
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].load(), i == 0 ? 0 : 1) << i;
  tsfuse::forLaterSlabs(c10::kCPU, 1, [&](int64_t, int64_t) { ADD_FAILURE() << "one slab has no later ones"; });
}

}  // namespace

}  // namespace ops_chain_fused_stage_test
