// tsfuse::reduce_chain with operands that require grad: a chain of two sums or means trains fused
// (its forward and every operand's gradient are reduce_chain calls, no ATen op of the region runs),
// other chains run ATen's autograd through the reference; the gradients are eager's either way
// (float64, within 1e-12: the backward sums in another order).
#include "chain_util.h"

#include "kernels/reference/aten_eval.h"
#include "kernels/runtime/sweep.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/autograd.h>

#include <set>

namespace chain_autograd_test {
namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

// The names of the ops and autograd nodes run on this thread while it lives.
class OpsRun {
 public:
  OpsRun() {
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
          names().insert(fn.name());
          return nullptr;
        }).scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    names().clear();
  }
  ~OpsRun() { at::removeCallback(handle_); }
  bool ran(const std::string& name) const { return names().count(name) > 0; }
  // Whether an ATen op's autograd node ran (PowBackward0, SumBackward1, ...).
  bool ranAtenNode() const {
    for (const std::string& n : names())
      if (n.find("Backward") != std::string::npos && n.find("CppNode") == std::string::npos) return true;
    return false;
  }

 private:
  static std::set<std::string>& names() {
    thread_local std::set<std::string> n;
    return n;
  }
  at::CallbackHandle handle_;
};

struct Case {
  std::string expr;
  std::vector<std::string> stages;
  T operands;
  std::vector<bool> grad;
  bool fused;  // whether the backward runs fused
};

// The chain's output and gradients through the op and through ATen's autograd of its reference,
// for a fixed cotangent; `c.fused`: whether the op's backward runs without ATen's autograd nodes.
void expectEagersGradients(const Case& c) {
  SCOPED_TRACE(c.expr + " || " + c.stages[0] + " || " + c.stages.back());
  auto run = [&](bool fused, bool* ranAten) {
    T leaves;
    for (size_t k = 0; k < c.operands.size(); ++k) {
      const at::Tensor& o = c.operands[k];
      leaves.push_back(tsfuse::isWrappedNumber(o) ? o : o.detach().clone().requires_grad_(c.grad[k]));
    }
    at::Tensor out = fused ? tsfuse::reduceChain(leaves, c.expr, c.stages)
                           : tsfuse::evalChain(*tsfuse::cachedChain(c.expr, c.stages), leaves)[0];
    EXPECT_TRUE(out.requires_grad());
    at::Tensor w = at::linspace(-1.5, 2.0, out.numel(), out.options()).view(out.sizes());
    {
      OpsRun ops;
      out.backward(w);
      if (ranAten) *ranAten = ops.ranAtenNode();
      if (fused && c.fused)
        EXPECT_TRUE(ops.ran("tsfuse::reduce_chain") || ops.ran("tsfuse::reduce") || ops.ran("tsfuse::pairwise"));
    }
    T grads{out.detach()};
    for (const auto& l : leaves) grads.push_back(l.grad());
    return grads;
  };
  bool ranAten = false;
  const T want = run(false, nullptr), got = run(true, &ranAten);
  EXPECT_EQ(!ranAten, c.fused) << "the backward " << (ranAten ? "ran" : "did not run") << " ATen's ops";
  EXPECT_TRUE(sameTensor(want[0], got[0], false, 1e-12, 1e-12)) << "output";
  for (size_t k = 1; k < want.size(); ++k) {
    EXPECT_EQ(want[k].defined(), got[k].defined()) << "operand " << k - 1;
    if (want[k].defined() && got[k].defined())
      EXPECT_TRUE(sameTensor(want[k], got[k], false, 1e-12, 1e-12)) << "grad of operand " << k - 1;
  }
}

const std::string kSquares = "v1: sub($0, $1); pow(%0, 2)";

T points(int64_t n, int64_t m, int64_t d, uint64_t seed) {
  Gen g(seed);
  return {g.tensor({n, 1, d}, at::kDouble), g.tensor({m, d}, at::kDouble)};
}

// The Gaussian kernel sum, exp(-((x[:, None] - y[None]) ** 2).sum(-1) / s).sum(1).
TEST(ChainAutograd, GaussianKernelSumTrainsFused) {
  T in = points(7, 6, 3, 400);
  in.push_back(tsfuse::wrappedNumber(1.7));
  expectEagersGradients(
      {kSquares,
       {"sum(dim=[2], keepdim=False) |> v1: neg($0); div(%0, $1); exp(%1)", "sum(dim=[1], keepdim=False)"},
       in,
       {true, true, false},
       true});
}

// Means, kept dims, and a last stage over every dim.
TEST(ChainAutograd, MeansAndKeptDimsTrainFused) {
  T in = points(5, 8, 2, 401);
  in.push_back(tsfuse::wrappedNumber(0.5));
  expectEagersGradients({kSquares,
                         {"mean(dim=[-1], keepdim=True) |> v1: mul($0, $1); exp(%0)", "mean(dim=[1], keepdim=True)"},
                         in,
                         {true, true, false},
                         true});
  expectEagersGradients({kSquares,
                         {"sum(dim=[2], keepdim=False) |> v1: sqrt($0)", "sum(dim=None, keepdim=False)"},
                         points(4, 3, 2, 402),
                         {false, true},
                         true});
}

// Operands of every place: stage 0's epilogue (a per-column bandwidth), stage 1's fused input (a
// weight per column) and stage 1's epilogue (a log and a scale per row).
TEST(ChainAutograd, EveryStagesOperandsTrainFused) {
  Gen g(403);
  T in = points(6, 5, 3, 404);
  in.push_back(g.tensor({5}, at::kDouble).abs().add(0.5));  // stage 0's epilogue: s
  in.push_back(g.tensor({1, 5}, at::kDouble));              // stage 1's input: b
  in.push_back(g.tensor({6}, at::kDouble));                 // stage 1's epilogue: c
  expectEagersGradients({kSquares,
                         {"sum(dim=[2], keepdim=False) |> v1: div($0, $1); neg(%0); exp(%1)",
                          "fused(v1: mul($0, $1); $0 = value) |> sum(dim=[1], keepdim=False) |> v1: add($0, 1.0); "
                          "log(%0); mul(%1, $1)"},
                         in,
                         {true, true, true, true, true},
                         true});
}

// An L1 distance's gradient, sign(x - y) times the incoming one, does not read stage 0's sums: each
// operand's gradient is one tsfuse::reduce of its program alone, stage 0 not recomputed.
TEST(ChainAutograd, AGradientNotReadingStageZerosValueSkipsIt) {
  Gen g(411);
  T in = points(6, 5, 3, 411);
  in.push_back(g.tensor({5}, at::kDouble));  // stage 0's epilogue: a weight per column
  const Case c{"v1: sub($0, $1); abs(%0)",
               {"sum(dim=[2], keepdim=False) |> v1: mul($0, $1)", "sum(dim=None, keepdim=False)"},
               in,
               {true, true, false},
               true};
  expectEagersGradients(c);
  T leaves = {in[0].clone().requires_grad_(), in[1].clone().requires_grad_(), in[2]};
  at::Tensor out = tsfuse::reduceChain(leaves, c.expr, c.stages);
  OpsRun ops;
  out.backward();
  EXPECT_TRUE(ops.ran("tsfuse::reduce"));
  EXPECT_FALSE(ops.ran("tsfuse::reduce_chain"));
}

// A stage 0 operand as large as stage 0's space has no dims to sum: its gradient is a pairwise op
// over the stored stage 0 value.
TEST(ChainAutograd, AnOperandOfTheWholeSpaceTrainsFused) {
  Gen g(405);
  T in = {g.tensor({4, 5, 3}, at::kDouble), g.tensor({5, 3}, at::kDouble)};
  expectEagersGradients({"v1: mul($0, $1); tanh(%0)",
                         {"sum(dim=[2], keepdim=False) |> v1: exp($0)", "sum(dim=[0], keepdim=False)"},
                         in,
                         {true, true},
                         true});
}

// Stage 1 hands its gradient to stage 0's value by its own rule (fused_grad.h, Adjoint): Chamfer's
// minimum (ties split as eager's amin; to the index for max/min(dim)'s values), logsumexp, and the
// soft assignment's softmax over the sums (its output saved, as eager saves it).
TEST(ChainAutograd, ExtremaLogsumexpAndSoftmaxTrainFused) {
  T in = points(6, 5, 2, 408);
  in[1] = at::cat({in[1].slice(0, 0, 3), in[1].slice(0, 0, 2)});  // repeated points: tied distances
  in.push_back(tsfuse::wrappedNumber(0.5));
  for (const char* last :
       {"amin(dim=[1], keepdim=False)", "amin:index(dim=[1], keepdim=True)", "amax:index(dim=[0], keepdim=False)",
        "logsumexp(dim=[1], keepdim=False)", "softmax(dim=1)", "log_softmax(dim=0)"})
    expectEagersGradients(
        {kSquares, {"sum(dim=[2], keepdim=False) |> v1: neg($0); mul(%0, $1)", last}, in, {true, true, false}, true});
  T weighted = in;
  weighted.push_back(Gen(409).tensor({1, 5}, at::kDouble));
  expectEagersGradients({kSquares,
                         {"sum(dim=[2], keepdim=False) |> v1: neg($0); mul(%0, $1)",
                          "fused(v1: mul($0, $1); $0 = value) |> amin(dim=[1], keepdim=False)"},
                         weighted,
                         {true, true, false, true},
                         true});
}

// max/min(dim)'s values route each output's gradient to one index (chain_routed.cpp): the operands
// varying along the reduced dim are read there (a gather) and their gradients added back there
// (index_put_ with accumulate), for every place an operand can have: stage 0's expression, stage
// 0's epilogue (a bandwidth per column) and stage 1's fused input (a weight per column or row),
// each requiring grad, through tied distances.
TEST(ChainAutograd, RoutedExtremaReadTheirOperandsAtTheIndex) {
  Gen g(412);
  T in = points(6, 5, 2, 412);
  in[1] = at::cat({in[1].slice(0, 0, 3), in[1].slice(0, 0, 2)});  // tied distances
  in.push_back(g.tensor({5}, at::kDouble).abs().add(0.5));        // stage 0's epilogue: s per column
  in.push_back(g.tensor({6, 1}, at::kDouble));                    // stage 1's input: w per row
  in.push_back(g.tensor({1, 5}, at::kDouble));                    // ... and per column
  const std::string epilogue = "sum(dim=[2], keepdim=False) |> v1: neg($0); div(%0, $1)";
  for (const char* last : {"fused(v1: mul($0, $1); mul(%0, $2); $0 = value) |> amin:index(dim=[1], keepdim=False)",
                           "fused(v1: mul($0, $1); mul(%0, $2); $0 = value) |> amax:index(dim=[0], keepdim=True)"}) {
    const Case c{kSquares, {epilogue, last}, in, {true, true, true, true, true}, true};
    expectEagersGradients(c);
    T leaves;
    for (const auto& t : in) leaves.push_back(t.clone().requires_grad_());
    at::Tensor out = tsfuse::reduceChain(leaves, c.expr, c.stages);
    OpsRun ops;
    out.sum().backward();
    EXPECT_TRUE(ops.ran("aten::gather")) << last;
    EXPECT_TRUE(ops.ran("aten::index_put_")) << last;
  }
}

// An extremum over a dim stage 0 already summed and kept (size 1 there): its one index stands for
// every row stage 0 summed, so every row gets the gradient (routing would give the first alone).
TEST(ChainAutograd, AnExtremumOverADimStageZeroKeptRoutesNothing) {
  Gen g(413);
  const T in{g.tensor({1, 4}, at::kDouble), g.tensor({2, 1, 4}, at::kDouble)};
  for (const char* last : {"amax:index(dim=[-3], keepdim=True)", "amin:index(dim=[0], keepdim=False)"}) {
    const Case c{"v1: add($0, 1); mul($1, %0)", {"sum(dim=[-3], keepdim=True)", last}, in, {true, true}, true};
    expectEagersGradients(c);
  }
}

// Chamfer's sweep: each minimum's gradient through its chain [stage 0, branch], summed; a branch
// whose output has no gradient adds nothing.
TEST(ChainAutograd, ChamferSweepTrainsFused) {
  T in = points(6, 5, 3, 410);
  in[1] = at::cat({in[1].slice(0, 0, 3), in[1].slice(0, 0, 2)});  // tied distances
  const std::vector<std::string> stages{"sum(dim=[-1], keepdim=False)", "amin(dim=[1], keepdim=False)",
                                        "amin:index(dim=[0], keepdim=False)"};
  auto run = [&](bool fused, bool both) {
    at::Tensor x = in[0].clone().requires_grad_(), y = in[1].clone().requires_grad_();
    std::vector<at::Tensor> out = fused ? tsfuse::reduceSweep({x, y}, kSquares, stages)
                                        : tsfuse::evalSweep(*tsfuse::cachedSweep(kSquares, stages), {x, y});
    at::Tensor loss = out[0].mean() * 0.7;
    if (both) loss = loss + out[1].mean();
    OpsRun ops;
    loss.backward();
    if (fused) EXPECT_TRUE(ops.ran("tsfuse::reduce_chain"));
    return std::vector<at::Tensor>{x.grad(), y.grad()};
  };
  for (bool both : {true, false}) {
    const auto want = run(false, both), got = run(true, both);
    EXPECT_TRUE(sameTensor(want[0], got[0], false, 1e-12, 1e-12)) << "x, both " << both;
    EXPECT_TRUE(sameTensor(want[1], got[1], false, 1e-12, 1e-12)) << "y, both " << both;
  }
}

// Chains the fused backward does not cover run ATen's autograd through the reference: a third
// stage, an extremum first, stage 1 broadcasting stage 0's value, and a double backward.
TEST(ChainAutograd, OtherChainsTrainThroughAten) {
  T in = points(4, 5, 2, 406);
  expectEagersGradients({kSquares,
                         {"sum(dim=[2], keepdim=True)", "sum(dim=[1], keepdim=True)", "sum(dim=[0], keepdim=False)"},
                         in,
                         {true, true},
                         false});
  expectEagersGradients(
      {kSquares, {"amax(dim=[2], keepdim=False)", "sum(dim=[1], keepdim=False)"}, in, {true, true}, false});
  Gen g(407);
  T wide = in;
  wide.push_back(g.tensor({3, 1, 1}, at::kDouble));
  expectEagersGradients(
      {kSquares,
       {"sum(dim=[2], keepdim=False)", "fused(v1: mul($0, $1); $0 = value) |> sum(dim=[2], keepdim=False)"},
       wide,
       {true, true, true},
       false});

  at::Tensor x0 = in[0].clone().requires_grad_(true), y = in[1];
  auto second = [&](bool fused) {
    at::Tensor x = x0.detach().clone().requires_grad_(true);
    const std::vector<std::string> st{"sum(dim=[2], keepdim=False) |> v1: neg($0); exp(%0)",
                                      "sum(dim=[1], keepdim=False)"};
    at::Tensor v = fused ? tsfuse::reduceChain({x, y}, kSquares, st)
                         : tsfuse::evalChain(*tsfuse::cachedChain(kSquares, st), {x, y})[0];
    at::Tensor gx = torch::autograd::grad({v.sum()}, {x}, {}, true, /*create_graph=*/true)[0];
    return torch::autograd::grad({gx.pow(2).sum()}, {x})[0];
  };
  EXPECT_TRUE(sameTensor(second(false), second(true), false, 1e-12, 1e-12));
}

// Sibling reductions (stage 0's value read by the fused stage's epilogue) train as the two
// tsfuse::reduce ops they were, stage 0's value stored between them: each with its fused gradient
// where it has one (the second has an epilogue: ATen's autograd of its reference).
TEST(ChainAutograd, SiblingsTrainAsTheirTwoFusedReductions) {
  Gen g(408);
  T in = points(6, 5, 3, 409);
  in.push_back(g.tensor({6, 1, 4}, at::kDouble));
  in.push_back(g.tensor({5, 4}, at::kDouble));
  expectEagersGradients({kSquares,
                         {"sum(dim=[2], keepdim=False)",
                          "fused(v1: sub($0, $1); mul(%0, %0); $2 = value) |> sum(dim=[2], keepdim=False) |> "
                          "v1: mul($0, $1)"},
                         in,
                         {true, true, true, false},
                         false});
}

// A chain or sweep whose value reads the operands through a comparison alone (a normalized mask,
// v / v.sum(0) of v = x <= y) requires no grad, as eager's does, and runs without an
// autograd node; an operand of a later stage that requires grad gives it one.
TEST(ChainAutograd, ValuesOfMasksRequireNoGrad) {
  Gen g(411);
  const at::Tensor x = g.tensor({5, 1}, at::kFloat).requires_grad_(), y = g.tensor({4}, at::kFloat);
  const std::string mask = "v1: le($0, $1)";
  const std::vector<std::string> chain{"sum(dim=[0], keepdim=True) |> v1: div($1, $0)", "sum(dim=None, keepdim=False)"};
  const at::Tensor m = x.detach() <= y;  // (the epilogue's $1: the value itself, as the pass passes it)
  const at::Tensor fused = tsfuse::reduceChain({x, y, m}, mask, chain);
  const at::Tensor eager = tsfuse::evalChain(*tsfuse::cachedChain(mask, chain), {x, y, m})[0];
  EXPECT_FALSE(eager.requires_grad());
  EXPECT_FALSE(fused.requires_grad());
  EXPECT_TRUE(sameTensor(eager, fused.detach(), false, 1e-6, 1e-6));

  const std::vector<std::string> sweep{"sum(dim=[1], keepdim=False)", "amax(dim=[0], keepdim=False)",
                                       "amin(dim=[0], keepdim=False)"};
  for (const at::Tensor& r : tsfuse::reduceSweep({x, y}, mask, sweep)) EXPECT_FALSE(r.requires_grad());

  const at::Tensor w = g.tensor({1, 4}, at::kFloat).requires_grad_();
  const std::vector<std::string> scaled{"sum(dim=[0], keepdim=True) |> v1: mul($0, $1)",
                                        "sum(dim=None, keepdim=False)"};
  const at::Tensor s = tsfuse::reduceChain({x, y, w}, mask, scaled);
  ASSERT_TRUE(s.requires_grad());
  s.backward();
  const at::Tensor want = tsfuse::evalChain(*tsfuse::cachedChain(mask, scaled), {x.detach(), y, w.detach()})[0];
  EXPECT_TRUE(sameTensor(want, s.detach(), false, 1e-6, 1e-6));
  EXPECT_TRUE(w.grad().defined());
}

}  // namespace
}  // namespace chain_autograd_test
