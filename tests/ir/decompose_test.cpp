// The decomposition table (passes/analysis/decompositions.h) against ATen: each unguarded entry's graph,
// run unfused, gives the op's results bit for bit (values, dtype, shape) and raises the op's
// errors, over broadcast, same-shape, 0-dim, empty, integer and mixed-dtype operands; the
// entries' conditions keep the op whole where they do not hold (named negative cases); a decomposed
// op over a broadcast fuses; and a guarded entry (matmul) is its op within the reductions'
// tolerance where its guard holds and the op itself, bits and errors, where it does not.
#include "ir_util.h"

#include "kernels/runtime/product_sums.h"
#include "passes/analysis/decompositions.h"
#include "passes/decompose.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <cmath>

namespace ir_decompose_test {

namespace {

using namespace tsfuse_test;

// graph(%a, %b): the op applied with the given constant arguments.
std::shared_ptr<Graph> opGraph(const std::string& call, const std::string& extra) {
  return graphWithConstants("%a : Tensor, %b : Tensor", "  %r : Tensor = " + call + "\n  return (%r)\n", extra, true);
}

std::string errorOf(const std::shared_ptr<Graph>& g, const std::vector<c10::IValue>& in) {
  try {
    runGraph(g, in);
  } catch (const std::exception& e) {
    std::string m = e.what();
    return m.substr(0, m.find('\n'));
  }
  return "";
}

// The operand pairs every entry is checked over.
std::vector<std::pair<at::Tensor, at::Tensor>> operandPairs(uint64_t seed) {
  Gen g(seed);
  std::vector<std::pair<at::Tensor, at::Tensor>> out = {
      {g.tensor({9, 1, 5}, at::kFloat, kSignedZero), g.tensor({1, 7, 5}, at::kFloat)},
      {g.tensor({6, 4}, at::kDouble, kNaNInf), g.tensor({6, 4}, at::kDouble)},
      {g.tensor({6, 4}, at::kFloat), g.tensor({6, 4}, at::kDouble)},  // mixed dtypes
      {g.tensor({5, 3}, at::kLong), g.tensor({1, 3}, at::kLong)},     // integers
      {g.tensor({}, at::kFloat), g.tensor({}, at::kFloat)},           // 0-dim
      {g.tensor({0, 3}, at::kFloat), g.tensor({1, 3}, at::kFloat)},   // empty rows
      {g.tensor({4, 0}, at::kFloat), g.tensor({4, 0}, at::kFloat)},   // empty reduced dim
      {g.tensor({3, 4}, at::kFloat), g.tensor({5, 4}, at::kFloat)},   // do not broadcast
      {g.tensor({4, 3}, at::kHalf), g.tensor({4, 3}, at::kHalf)},
      {g.tensor({3}, at::kBool), g.tensor({3}, at::kBool)},
  };
  return out;
}

struct Call {
  std::string text;   // the op's node
  std::string extra;  // its constants
};

std::vector<Call> calls() {
  std::vector<Call> out;
  for (const char* p : {"2.", "1.", "3.", "0.", "0.5", "-1."})
    for (const char* keep : {"%false", "%true"})
      out.push_back({std::string("aten::pairwise_distance(%a, %b, %p, %eps, ") + keep + ")",
                     std::string("  %p : float = prim::Constant[value=") + p +
                         "]()\n  %eps : float = prim::Constant[value=1e-06]()\n"});
  for (const char* p : {"2", "1", "3", "0"})
    out.push_back({"aten::dist(%a, %b, %p)", std::string("  %p : int = prim::Constant[value=") + p + "]()\n"});
  out.push_back({"aten::dist(%a, %b, %p)", "  %p : float = prim::Constant[value=inf]()\n"});
  return out;
}

TEST(Decompose, EveryEntryIsItsOpBitForBitAndErrorForError) {
  int compared = 0, raised = 0;
  for (const Call& c : calls()) {
    auto original = opGraph(c.text, c.extra);
    auto g = original->copy();
    PassRun r = runPass(g, tsfuse::Decompose);
    ASSERT_TRUE(r.changed) << c.text << "\n" << r.dump();
    ASSERT_TRUE(findNodes(g, "aten::pairwise_distance").empty() && findNodes(g, "aten::dist").empty()) << r.ir;
    for (const auto& [a, b] : operandPairs(7)) {
      const std::vector<c10::IValue> in{a, b};
      const std::string want = errorOf(original, in), got = errorOf(g, in);
      EXPECT_EQ(want, got) << c.text << " " << a.sizes() << a.scalar_type() << " " << b.sizes() << b.scalar_type();
      if (!want.empty()) {
        ++raised;
        continue;
      }
      at::Tensor x = runGraph(original, in)[0].toTensor(), y = runGraph(g, in)[0].toTensor();
      EXPECT_EQ(x.scalar_type(), y.scalar_type()) << c.text;
      EXPECT_EQ(x.sizes(), y.sizes()) << c.text;
      EXPECT_TRUE(at::equal(x.isnan(), y.isnan()) && at::equal(x.nan_to_num(0, 1, -1), y.nan_to_num(0, 1, -1)))
          << c.text << " " << a.sizes() << a.scalar_type() << "\n"
          << x << "\n"
          << y;
      ++compared;
    }
  }
  EXPECT_GT(compared, 100);
  EXPECT_GT(raised, 20);  // non-broadcasting sizes, bool subtraction, dist of integers
}

TEST(Decompose, InfiniteOrKnownOnlyAtRunTimeOrdersKeepTheOpWhole) {
  // ATen names the dim it was given in the error of an inf norm over an empty dim
  // (pairwise_distance: the positive innermost one), which -1 would not.
  for (const char* p : {"inf", "-inf"}) {
    auto g = opGraph("aten::pairwise_distance(%a, %b, %p, %eps, %false)",
                     std::string("  %p : float = prim::Constant[value=") + p +
                         "]()\n  %eps : float = prim::Constant[value=1e-06]()\n");
    PassRun r = runPass(g, tsfuse::Decompose);
    EXPECT_FALSE(r.changed) << r.dump();
    EXPECT_TRUE(r.rejectedWith("p is infinite")) << r.dump();
  }
  auto g = graphWithConstants("%a : Tensor, %b : Tensor, %p : float", R"IR(
  %eps : float = prim::Constant[value=1e-06]()
  %r : Tensor = aten::pairwise_distance(%a, %b, %p, %eps, %false)
  return (%r)
)IR");
  PassRun r = runPass(g, tsfuse::Decompose);
  EXPECT_FALSE(r.changed);
  EXPECT_TRUE(r.rejectedWith("p is not a constant")) << r.dump();
}

TEST(Decompose, PairwiseDistanceOverABroadcastFusesIntoOneReduction) {
  // F.pairwise_distance(x[:, None], y[None]).argmin(1): the distances are never stored.
  auto g = graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %x1 : Tensor = aten::unsqueeze(%x, %one)
  %y1 : Tensor = aten::unsqueeze(%y, %zero)
  %p : float = prim::Constant[value=2.]()
  %eps : float = prim::Constant[value=1e-06]()
  %d : Tensor = aten::pairwise_distance(%x1, %y1, %p, %eps, %false)
  %i : Tensor = aten::argmin(%d, %one, %false)
  return (%i)
)IR");
  auto ref = g->copy();
  PassRun r = runPipelineOn(g);
  EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
    fc.check_not("aten::pairwise_distance")->check_count("tsfuse::reduce_chain", 1, true)->check_not("aten::argmin");
  }));
  auto chain = findNodes(g, "tsfuse::reduce_chain");
  ASSERT_EQ(chain.size(), 1u);
  EXPECT_EQ(exprOf(chain[0]), "v1: sub($0, $1); add(%0, 1e-06)");
  Gen gen(3);
  EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({40, 6}, at::kFloat), gen.tensor({30, 6}, at::kFloat)}));
}

// graph(%a, %x, %sizes): matmul(%a, %x.expand(%sizes)), or the expanded operand first.
std::shared_ptr<Graph> matmulOfExpanded(bool expandedFirst) {
  const std::string call = expandedFirst ? "aten::matmul(%xe, %a)" : "aten::matmul(%a, %xe)";
  return graphWithConstants(
      "%a : Tensor, %x : Tensor, %sizes : int[]",
      "  %xe : Tensor = aten::expand(%x, %sizes, %false)\n  %r : Tensor = " + call + "\n  return (%r)\n");
}

TEST(Decompose, MatrixVectorMatmulOverAnExpandedOperandIsItsSumOfProductsUnderAGuard) {
  // Soft k-means' weights [bs, k, 1, n] @ x[:, None].expand(bs, k, n, d): the expanded x is never
  // copied; the guard keeps the matmul for every input the sum would not compute as matmul does.
  struct Case {
    bool expandedFirst;
    at::Tensor a, x;
    std::vector<int64_t> sizes;
    bool decomposed;  // the guard holds: equal within the reductions' tolerance, else bit for bit
  };
  Gen g(11);
  const std::vector<Case> cases = {
      {false, g.tensor({4, 8, 1, 32}, at::kFloat), g.tensor({4, 1, 32, 16}, at::kFloat), {4, 8, 32, 16}, true},
      {false, g.tensor({4, 8, 1, 32}, at::kFloat, kNaNInf), g.tensor({4, 1, 32, 16}, at::kFloat), {4, 8, 32, 16}, true},
      {false, g.tensor({2, 3, 1, 32}, at::kDouble), g.tensor({2, 1, 32, 5}, at::kDouble), {2, 3, 32, 5}, true},
      {false, g.tensor({2, 3, 5, 32}, at::kDouble), g.tensor({2, 1, 32, 1}, at::kDouble), {2, 3, 32, 1}, false},
      {true, g.tensor({2, 3, 7, 1}, at::kFloat), g.tensor({2, 1, 6, 7}, at::kFloat), {2, 3, 6, 7}, true},  // column
      {false, g.tensor({1, 1, 1, 16}, at::kFloat), g.tensor({3, 1, 16, 4}, at::kFloat), {3, 2, 16, 4}, true},
      // matmul copies no matrix: a batch that flattens as a view, an expand to the same shape, the
      // vector's batch alone
      {false, g.tensor({3, 1, 1, 16}, at::kFloat), g.tensor({1, 1, 16, 4}, at::kFloat), {3, 2, 16, 4}, false},
      {false, g.tensor({3, 1, 32}, at::kFloat), g.tensor({1, 32, 4}, at::kFloat), {3, 32, 4}, false},
      {false, g.tensor({2, 3, 1, 16}, at::kFloat), g.tensor({2, 3, 16, 4}, at::kFloat), {2, 3, 16, 4}, false},
      {false, g.tensor({2, 3, 1, 0}, at::kFloat), g.tensor({2, 1, 0, 4}, at::kFloat), {2, 3, 0, 4}, false},
      {false, g.tensor({4, 8, 6, 32}, at::kFloat), g.tensor({4, 1, 32, 16}, at::kFloat), {4, 8, 32, 16}, false},
      {false, g.tensor({2, 2, 1, 5}, at::kLong), g.tensor({2, 1, 5, 3}, at::kLong), {2, 2, 5, 3}, false},
      {false, g.tensor({2, 2, 1, 5}, at::kHalf), g.tensor({2, 1, 5, 3}, at::kHalf), {2, 2, 5, 3}, false},
      {false, g.tensor({1, 32}, at::kFloat), g.tensor({2, 1, 32, 4}, at::kFloat), {2, 3, 32, 4}, false},  // 2-d
      {false, g.tensor({32}, at::kFloat), g.tensor({1, 32, 4}, at::kFloat), {2, 32, 4}, false},           // 1-d
      {false, g.tensor({2, 3, 1, 31}, at::kFloat), g.tensor({2, 1, 32, 4}, at::kFloat), {2, 3, 32, 4}, false},
      {false, g.tensor({2, 3, 1, 32}, at::kDouble), g.tensor({2, 1, 32, 4}, at::kFloat), {2, 3, 32, 4}, false},
      {false, g.tensor({4, 3, 1, 8}, at::kFloat), g.tensor({2, 1, 8, 4}, at::kFloat), {2, 3, 8, 4}, false},
  };
  int raised = 0, summed = 0;
  for (bool expandedFirst : {false, true}) {
    auto original = matmulOfExpanded(expandedFirst);
    auto once = original->copy();
    PassRun r = runPass(once, tsfuse::Decompose);
    ASSERT_TRUE(r.changed) << r.dump();
    EXPECT_EQ(r.rejects(), 0) << r.dump();
    EXPECT_TRUE(fileCheck(r.ir, [](FileCheck& fc) {
      fc.check("tsfuse::product_sums")
          ->check("prim::If")
          ->check("aten::mul")
          ->check("aten::sum")
          ->check("aten::matmul");
    }));
    auto twice = once->copy();
    EXPECT_FALSE(runPass(twice, tsfuse::Decompose).changed) << "the kept matmul was decomposed again";
    auto fused = original->copy();
    EXPECT_TRUE(fileCheck(runPipelineOn(fused).ir, [](FileCheck& fc) {
      fc.check("prim::If")->check("tsfuse::reduce(")->check_not("aten::mul")->check("aten::matmul");
    }));
    for (const Case& c : cases) {
      if (c.expandedFirst != expandedFirst) continue;
      const std::vector<c10::IValue> in{c.a, c.x, c10::IValue(c.sizes)};
      const std::string want = errorOf(original, in);
      EXPECT_EQ(want, errorOf(fused, in)) << c.a.sizes() << c.a.scalar_type() << " " << c.sizes;
      raised += !want.empty();
      if (!want.empty()) continue;
      summed += c.decomposed;
      EXPECT_TRUE(sameOutputs(original, fused, in, /*exact=*/!c.decomposed))
          << c.a.sizes() << c.a.scalar_type() << " " << c.sizes;
      EXPECT_EQ(
          tsfuse::productSums(expandedFirst ? c.x.expand(c.sizes) : c.a, expandedFirst ? c.a : c.x.expand(c.sizes)),
          c.decomposed)
          << c.a.sizes() << " " << c.sizes;
    }
  }
  EXPECT_EQ(raised, 3);  // inner sizes, dtypes, batch dims
  EXPECT_EQ(summed, 5);
}

TEST(Decompose, MatmulOfOperandsNotExpandedIsNoCandidate) {
  // A matmul that copies nothing stays whole, and is not reported (every model has them).
  auto g = graphWithConstants("%a : Tensor, %b : Tensor", "  %r : Tensor = aten::matmul(%a, %b)\n  return (%r)\n");
  PassRun r = runPass(g, tsfuse::Decompose);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.rejects(), 0) << r.dump();
}

TEST(Decompose, TheTableParsesAndNamesSchemasTorchKnows) {
  ASSERT_GE(tsfuse::decompositions().size(), 2u);
  for (const tsfuse::Decomposition& d : tsfuse::decompositions()) {
    const c10::FunctionSchema s = torch::jit::parseSchema(d.schema);
    EXPECT_TRUE(c10::Dispatcher::singleton().findSchema({s.name(), s.overload_name()}).has_value()) << d.schema;
    EXPECT_EQ(d.graph->inputs().size(), s.arguments().size()) << d.schema;
    EXPECT_EQ(d.graph->outputs().size(), s.returns().size()) << d.schema;
  }
}

}  // namespace

}  // namespace ir_decompose_test
