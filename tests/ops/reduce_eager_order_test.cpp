// Float32 sums, means and products of at most four values along one dim, and of eight along the
// dim eager's value holds innermost, are eager's bits (reduce_rules::foldsInFloat): ATen's CPU
// kernels fold those one after another in float,
// and the native reduction then rounds every step of its double fold to float. Sums and means of
// any length up to 511 along the innermost dim follow eager's inner-sum order (inner_sum.h). Checked bit for bit
// on every tiling (vertical compiled and interpreted, horizontal) and reduced-dim position, and
// through a chain whose argmin must then be eager's index. The values span many magnitudes, so
// the double fold rounded once differs from eager's (asserted: the data can tell the orders apart).
#include "test_util.h"

namespace ops_reduce_eager_order_test {

namespace {

using tsfuse_test::Gen;
using tsfuse_test::JitOn;

// Values of many magnitudes: float adds round often and differently in another order.
at::Tensor wide(Gen& g, at::IntArrayRef sizes) {
  return (at::randn(sizes, g.gen, at::kDouble) * at::exp(at::randn(sizes, g.gen, at::kDouble) * 3)).to(at::kFloat);
}

// x, y broadcast to a value with D values along `dim` (0: outer, 1: middle, 2: inner) and kept
// inner size m (>= 16: vertical tiles; < 16: horizontal).
struct Case {
  at::Tensor x, y;
  int64_t dim;
};
Case makeCase(Gen& g, int64_t D, int64_t dim, int64_t n, int64_t m) {
  switch (dim) {
    case 0:
      return {wide(g, {D, n, 1}), wide(g, {D, 1, m}), 0};
    case 1:
      return {wide(g, {n, D, 1}), wide(g, {1, D, m}), 1};
    default:
      return {wide(g, {n, 1, D}), wide(g, {1, m, D}), 2};
  }
}

at::Tensor eager(const std::string& kind, const at::Tensor& v, int64_t dim) {
  if (kind == "sum") return v.sum(dim);
  if (kind == "mean") return v.mean(dim);
  return v.prod(dim);
}

TEST(ReduceEagerOrder, FewFloat32ValuesAlongOneDimAreEagersBits) {
  Gen g(41);
  int64_t distinguishing = 0;  // outputs where the double fold rounded once differs from eager
  for (bool compiled : {true, false}) {
    JitOn on(compiled);
    for (int64_t D : {1, 2, 3, 4, 8})
      for (int64_t dim : {0, 1, 2})
        for (int64_t m : {40, 5})
          for (const std::string kind : {"sum", "mean", "prod"}) {
            if (D == 8 && dim != 2) continue;  // not innermost in eager's value: another order
            Case c = makeCase(g, D, dim, 300, m);
            const char* expr = kind == "prod" ? "v1: mul($0, $1)" : "v1: sub($0, $1); mul(%0, %0)";
            at::Tensor value = kind == "prod" ? c.x * c.y : (c.x - c.y) * (c.x - c.y);
            at::Tensor want = eager(kind, value, c.dim);
            at::Tensor got = tsfuse::reduce({c.x, c.y}, expr, kind, std::vector<int64_t>{c.dim}, false, std::nullopt);
            const std::string what = kind + " of " + std::to_string(D) + " along dim " + std::to_string(dim) +
                                     ", kept inner " + std::to_string(m) + (compiled ? ", compiled" : ", interpreted");
            EXPECT_EQ(tsfuse::lastPath(), std::string("native")) << what;
            EXPECT_TRUE(at::equal(got, want)) << what << ": " << (got != want).sum().item<int64_t>() << " differ";
            distinguishing += (eager(kind, value.to(at::kDouble), c.dim).to(at::kFloat) != want).sum().item<int64_t>();
          }
  }
  EXPECT_GT(distinguishing, 1000);
}

// Any number of float32/float64 values along the dim eager's value holds innermost, its only
// reduced dim: eager's inner-sum order (kernels/backends/cpu/inner_sum.h), four partial sums per lane of
// ATen's vectors, then the lanes. Lengths on both sides of every branch of that rule (shorter
// than a vector, whole groups of four vectors or not, values after the vectors or not), up to the
// longest it models.
TEST(ReduceEagerOrder, SumsAlongTheInnermostDimAreEagersBitsForEveryLength) {
  ASSERT_TRUE(tsfuse::cpu::eagerSumsInnerInOrder())
      << "at::sum no longer sums as kernels/backends/cpu/inner_sum.h says";
  Gen g(44);
  int64_t distinguishing = 0;  // outputs where a float fold in index order differs from eager
  const bool wide = tsfuse::cpu::jit::wideKernels();
  for (int run : {0, 1, 2}) {  // compiled (AVX-512 where the CPU has it), compiled AVX2, interpreted
    const bool compiled = run < 2;
    if (run == 1 && !wide) continue;
    JitOn on(compiled);
    tsfuse::cpu::jit::setWideKernels(wide && run == 0);
    const int64_t tilesBefore = tsfuse::cpu::jit::tilesRun();
    for (at::ScalarType type : {at::kFloat, at::kDouble})
      for (int64_t D : {5, 7, 9, 12, 16, 17, 31, 33, 40, 64, 65, 100, 255, 511})
        for (int64_t m : {61, 5})  // 61 lanes: whole blocks, then masked vectors
          for (const std::string kind : {"sum", "mean"}) {
            if (type == at::kDouble && D > 255) continue;  // past the 16 groups modelled for float64
            Case c = makeCase(g, D, 2, 23, m);
            c.x = c.x.to(type), c.y = c.y.to(type);
            at::Tensor value = (c.x - c.y) * (c.x - c.y);
            at::Tensor want = eager(kind, value, 2);
            at::Tensor got = tsfuse::reduce({c.x, c.y}, "v1: sub($0, $1); mul(%0, %0)", kind, std::vector<int64_t>{2},
                                            false, std::nullopt);
            const std::string what = kind + " of " + std::to_string(D) + " " + c10::toString(type) + ", kept inner " +
                                     std::to_string(m) +
                                     (run == 0   ? (wide ? ", AVX-512" : ", AVX2")
                                      : run == 1 ? ", AVX2"
                                                 : ", interpreted");
            EXPECT_EQ(tsfuse::lastPath(), std::string("native")) << what;
            EXPECT_TRUE(at::equal(got, want)) << what << ": " << (got != want).sum().item<int64_t>() << " differ";
            if (type == at::kFloat && kind == "sum") {
              at::Tensor folded = at::zeros({23, m}, at::kFloat);
              for (int64_t d = 0; d < D; ++d) folded = folded + value.select(2, d);
              distinguishing += (folded != want).sum().item<int64_t>();
            }
          }
    if (compiled) EXPECT_GT(tsfuse::cpu::jit::tilesRun(), tilesBefore) << "the compiled inner sums ran";
  }
  tsfuse::cpu::jit::setWideKernels(wide);
  EXPECT_GT(distinguishing, 1000);
}

TEST(ReduceEagerOrder, ANearestNeighbourOverThreeCoordinatesIsEagersIndex) {
  // Every point's nearest candidates are its own base moved by the six permutations of one offset
  // (a, b, c): equal distances in exact arithmetic, so the pick depends on how the three squares
  // were rounded and added.
  Gen g(42);
  at::Tensor base = at::randint(-50, 50, {40, 3}, g.gen, at::kLong).to(at::kFloat) * 10;
  at::Tensor offset = at::rand({40, 3}, g.gen, at::kFloat);
  std::vector<at::Tensor> perms;
  for (auto p : std::vector<std::vector<int64_t>>{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}})
    perms.push_back(base + offset.index_select(1, at::tensor(p)));
  at::Tensor y = at::cat(perms), x = base.unsqueeze(1);
  at::Tensor d = (x - y).pow(2).sum(-1);
  at::Tensor got = tsfuse::reduceChain({x, y}, "v1: sub($0, $1); pow(%0, 2)",
                                       {"sum(dim=[2], keepdim=False)", "argmin(dim=[1], keepdim=False)"});
  EXPECT_TRUE(at::equal(got, d.argmin(1)));
  // The distances of the double fold would pick other candidates.
  at::Tensor dd = (x - y).pow(2).to(at::kDouble).sum(-1).to(at::kFloat);
  EXPECT_FALSE(at::equal(dd.argmin(1), d.argmin(1)));
}

TEST(ReduceEagerOrder, SeveralReducedDimsAndLongerDimsStayWithinTolerance) {
  // Not eager's order there (ATen walks several reduced dims, and more values, otherwise): the
  // documented tolerance.
  Gen g(43);
  at::Tensor x = wide(g, {2, 64, 1, 2}), y = wide(g, {2, 1, 40, 2});
  at::Tensor got =
      tsfuse::reduce({x, y}, "v1: sub($0, $1); mul(%0, %0)", "sum", std::vector<int64_t>{0, 3}, false, std::nullopt);
  at::Tensor want = ((x - y) * (x - y)).sum(std::vector<int64_t>{0, 3});
  EXPECT_TRUE(at::allclose(got, want, 1e-5, 0));
  at::Tensor e8 = wide(g, {8, 64, 1}), f8 = wide(g, {8, 1, 40});  // 8 values, outermost in eager's value
  got = tsfuse::reduce({e8, f8}, "v1: sub($0, $1); mul(%0, %0)", "sum", std::vector<int64_t>{0}, false, std::nullopt);
  EXPECT_TRUE(at::allclose(got, ((e8 - f8) * (e8 - f8)).sum(0), 1e-5, 0));
  // 512 float32 values along the inner dim: ATen's partial sums move through further levels.
  at::Tensor a = wide(g, {16, 1, 512}), b = wide(g, {1, 40, 512});
  got = tsfuse::reduce({a, b}, "v1: sub($0, $1); mul(%0, %0)", "sum", std::vector<int64_t>{2}, false, std::nullopt);
  EXPECT_TRUE(at::allclose(got, ((a - b) * (a - b)).sum(2), 1e-5, 0));
}

}  // namespace

}  // namespace ops_reduce_eager_order_test
