// IR-string tests of canonicalize's x[mask] = c rewrite where the mask's layout is not proven x's
// (passes/canonicalize.cpp, tryBoolMaskFill's checked form): x = areas.repeat(n, 1) written
// through masks computed elsewhere, then reduced with min(dim) (FCOS's target assignment), is
// where(tsfuse::index_mask(mask, x), value, x) (masked_fill(x, ..., c) for a traced constant) and
// one fused op with the reduction: the same values, indices and errors (another mask size) for
// every dtype. Named negative cases: x read where its strides could show (returned, summed), a
// mask not provably of x's rank.
#include "ir_util.h"

namespace ir_checked_mask_fill_test {

namespace {

using namespace tsfuse_test;

// graph(%p [P], %q [Q], %g [G, 4]): x = areas[None].repeat(P, 1), two writes x[mask] = 1e8 with
// masks over [P, G] (or [Q, G]: `maskFrom`; `column` makes them of rank 1 instead), then `tail`.
std::shared_ptr<Graph> fcosThen(const std::string& tail, const std::string& maskFrom = "%p",
                                const std::string& column = "aten::unsqueeze(%src, %one)") {
  const std::string body = R"IR(
  %inf : float = prim::Constant[value=100000000.]()
  %three : int = prim::Constant[value=3]()
  %g0 : Tensor = aten::select(%g, %one, %zero)
  %g2 : Tensor = aten::select(%g, %one, %two)
  %g3 : Tensor = aten::select(%g, %one, %three)
  %areas : Tensor = aten::sub(%g2, %g0, %one)
  %n : int = aten::size(%p, %zero)
  %u : Tensor = aten::unsqueeze(%areas, %zero)
  %reps : int[] = prim::ListConstruct(%n, %one)
  %x : Tensor = aten::repeat(%u, %reps)
)IR" + std::string("  %src : Tensor = aten::mul(") +
                           maskFrom + ", %two)\n  %col : Tensor = " + column + "\n" +
                           R"IR(  %left : Tensor = aten::sub(%col, %g0, %one)
  %right : Tensor = aten::sub(%g3, %col, %one)
  %out : Tensor = aten::lt(%left, %zero)
  %far : Tensor = aten::gt(%right, %two)
)IR" + maskWriteIR("%x", "%out", "%inf", "1") +
                           maskWriteIR("%x", "%far", "%inf", "2") + tail;
  return graphWithConstants("%p : Tensor, %q : Tensor, %g : Tensor", body);
}

const char* kMin = R"IR(
  %v : Tensor, %i : Tensor = aten::min(%x, %one, %false)
  return (%v, %i)
)IR";

std::vector<c10::IValue> boxes(uint64_t seed, int64_t p, int64_t q, int64_t g, at::ScalarType t = at::kFloat) {
  Gen gen(seed);
  return {gen.tensor({p}, t) * 3, gen.tensor({q}, t) * 3, gen.tensor({g, 4}, t) * 4};
}

TEST(CheckedMaskFillIR, RepeatWrittenThroughOtherMasksThenMinIsOneFusedOp) {
  Piped f = pipeline(fcosThen(kMin));
  EXPECT_TRUE(fileCheck(f.r.ir, [](FileCheck& fc) {
    fc.check_not("aten::index_put_")->check_not("aten::repeat")->check_count("tsfuse::reduce_with_indices", 1, true);
  }));
  EXPECT_EQ(computingFusedOps(f.g), 1) << f.r.ir;
  for (uint64_t seed : {1, 2}) EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(seed, 300, 300, 13)));
  EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(3, 7, 7, 1)));
  EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(4, 5, 5, 9, at::kDouble)));
  EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(5, 5, 5, 9, at::kInt)));
  // 1e8 overflows int16: scripting's tensor(1e8, dtype=int16) wraps it, on both
  EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(6, 5, 5, 9, at::kShort)));
}

TEST(CheckedMaskFillIR, AMaskOfOtherSizesRaisesIndexPutsError) {
  // The masks are [Q, G], x is [P, G]: index_put_ raises where a where() would broadcast.
  Piped f = pipeline(fcosThen(kMin, "%q"));
  ASSERT_EQ(findNodes(f.g, "aten::index_put_").size(), 0u) << f.r.dump();
  EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(7, 6, 6, 5)));
  for (int64_t q : {5, 1}) {
    const std::string err = errorOf(f.ref, boxes(8, 6, q, 5));
    EXPECT_NE(err.find("The shape of the mask"), std::string::npos) << err;
    EXPECT_EQ(errorOf(f.g, boxes(8, 6, q, 5)), err);
  }
}

TEST(CheckedMaskFillIR, NamedNegatives) {
  struct Case {
    std::string tail, unsqueeze, why;
  };
  const Case cases[] = {
      {"  return (%x)\n", "aten::unsqueeze(%src, %one)", "whose result its strides may change"},
      {"  %s : Tensor = aten::sum(%x, %none)\n  return (%s)\n", "aten::unsqueeze(%src, %one)",
       "whose result its strides may change"},
      {kMin, "aten::neg(%src)", "is not provably of its rank"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    Piped f = pipeline(fcosThen(c.tail, "%p", c.unsqueeze));
    EXPECT_EQ(findNodes(f.g, "aten::index_put_").size(), 2u) << f.r.dump();
    EXPECT_NE(f.r.dump().find(c.why), std::string::npos) << f.r.dump();
    if (c.unsqueeze != "aten::neg(%src)") EXPECT_TRUE(sameOutputs(f.ref, f.g, boxes(9, 6, 6, 5)));
  }
}

}  // namespace

}  // namespace ir_checked_mask_fill_test
