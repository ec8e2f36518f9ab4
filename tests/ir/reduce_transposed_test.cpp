// IR-string tests of reduce_transposed (passes/reduce_transposed.h) through the pipeline: a
// reduction of a transposed elementwise result reduces the result over the swapped dims, so the
// region and the reduction are one fused op, bit for bit eager's (float sums folded in eager's
// order), indices included. Named negative cases: var (its all-dims kernel reads a contiguous
// copy), argmin over every dim (an index into the flattened transpose), a transposed graph
// input, non-adjacent swapped dims, keepdim with one swapped dim reduced, neither swapped dim
// reduced, dims of both signs.
#include "ir_util.h"

namespace ir_reduce_transposed_test {

namespace {

using namespace tsfuse_test;

// graph(%c, %u, %v): %s = (-%c + %u + %v) / eps as log-domain Sinkhorn's M(C, u, v), then `tail`.
std::shared_ptr<Graph> sinkhornThen(const std::string& tail) {
  return graphWithConstants("%c : Tensor, %u : Tensor, %v : Tensor", R"IR(
  %eps : float = prim::Constant[value=0.1]()
  %n : Tensor = aten::neg(%c)
  %a : Tensor = aten::add(%n, %u, %one)
  %b : Tensor = aten::add(%a, %v, %one)
  %s : Tensor = aten::div(%b, %eps)
)IR" + tail,
                            "  %m2 : int = prim::Constant[value=-2]()\n"
                            "  %m3 : int = prim::Constant[value=-3]()\n"
                            "  %dimsm1 : int[] = prim::Constant[value=[-1]]()\n"
                            "  %dims0 : int[] = prim::Constant[value=[0]]()\n"
                            "  %dims01 : int[] = prim::Constant[value=[0, 1]]()\n");
}

std::vector<c10::IValue> costs(uint64_t seed, int64_t b, int64_t n, int64_t m, at::ScalarType t = at::kFloat) {
  Gen g(seed);
  return {g.tensor({b, n, m}, t), g.tensor({b, n, 1}, t), g.tensor({b, 1, m}, t)};
}

void expectExact(const Piped& f) {
  for (uint64_t seed : {1, 2}) EXPECT_TRUE(sameOutputs(f.ref, f.g, costs(seed, 3, 37, 300)));
  EXPECT_TRUE(sameOutputs(f.ref, f.g, costs(3, 2, 301, 19)));
  EXPECT_TRUE(sameOutputs(f.ref, f.g, costs(4, 2, 1, 7)));
  EXPECT_TRUE(sameOutputs(f.ref, f.g, costs(5, 2, 64, 65, at::kDouble)));
}

TEST(ReduceTransposedIR, SinkhornColumnLogsumexpIsOneReduce) {
  Piped f = pipeline(sinkhornThen(R"IR(
  %t : Tensor = aten::transpose(%s, %m2, %m1)
  %r : Tensor = aten::logsumexp(%t, %dimsm1, %false)
  return (%r)
)IR"));
  ASSERT_EQ(f.r.rewritesBy("reduce_transposed"), 1) << f.r.dump();
  EXPECT_TRUE(fileCheck(f.r.ir, [](FileCheck& fc) {
    fc.check_not("aten::transpose")->check_count("tsfuse::reduce", 1, true)->check_not("aten::logsumexp");
  }));
  EXPECT_EQ(computingFusedOps(f.g), 1) << f.r.ir;
  expectExact(f);
}

TEST(ReduceTransposedIR, SumsOverBothSwappedDimsAndIndicesAlongOne) {
  Piped f = pipeline(sinkhornThen(R"IR(
  %t : Tensor = aten::transpose(%s, %one, %two)
  %all : Tensor = aten::sum(%t, %none)
  %t2 : Tensor = aten::transpose(%s, %zero, %one)
  %both : Tensor = aten::sum(%t2, %dims01, %true, %none)
  %t3 : Tensor = aten::transpose(%s, %one, %two)
  %mx : Tensor, %ix : Tensor = aten::max(%t3, %two, %false)
  return (%all, %both, %mx, %ix)
)IR"));
  EXPECT_EQ(f.r.rewritesBy("reduce_transposed"), 3) << f.r.dump();
  EXPECT_TRUE(fileCheck(f.r.ir, [](FileCheck& fc) { fc.check_not("aten::transpose"); }));
  expectExact(f);
}

TEST(ReduceTransposedIR, NamedNegatives) {
  struct Case {
    const char* tail;
    const char* why;
  };
  const Case cases[] = {
      {"  %t : Tensor = aten::transpose(%s, %m2, %m1)\n  %r : Tensor = aten::var(%t, %dimsm1, %true, %false)\n",
       nullptr},
      // (an index into the flattened transposed value)
      {"  %t : Tensor = aten::transpose(%s, %m2, %m1)\n  %r : Tensor = aten::argmin(%t, %none, %false)\n", nullptr},
      {"  %t : Tensor = aten::transpose(%c, %m2, %m1)\n  %r : Tensor = aten::sum(%t, %dimsm1, %false, %none)\n",
       "not an elementwise op's result"},
      {"  %t : Tensor = aten::transpose(%s, %m3, %m1)\n  %r : Tensor = aten::sum(%t, %dimsm1, %false, %none)\n",
       "not adjacent"},
      {"  %t : Tensor = aten::transpose(%s, %m2, %m1)\n  %r : Tensor = aten::sum(%t, %dimsm1, %true, %none)\n",
       "with keepdim"},
      {"  %t : Tensor = aten::transpose(%s, %m2, %m1)\n  %r : Tensor = aten::sum(%t, %dims1, %false, %none)\n",
       "mix signs"},
      {"  %t : Tensor = aten::transpose(%s, %one, %two)\n  %r : Tensor = aten::sum(%t, %dims0, %false, %none)\n",
       "neither swapped dim"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tail);
    Piped f = pipeline(sinkhornThen(std::string(c.tail) + "  return (%r)\n"));
    EXPECT_EQ(f.r.rewritesBy("reduce_transposed"), 0) << f.r.dump();
    EXPECT_TRUE(fileCheck(f.r.ir, [](FileCheck& fc) { fc.check("aten::transpose"); }));
    if (c.why) EXPECT_NE(f.r.dump().find(c.why), std::string::npos) << f.r.dump();
    expectExact(f);
  }
}

}  // namespace

}  // namespace ir_reduce_transposed_test
