// Slabs of batched chains and sweeps (kernels/runtime/chain.h: slabDimOrder, slabStep): a batch of
// [N, M] distance matrices is sliced along its rows where two matrices would pass the slab
// budget, and along the batch one matrix a slab where only the batch is kept by every stage and
// one matrix already broadcasts beyond the operands. Checked: the plan's slab dim and step, and
// the values bit for bit against the chain unsliced and against eager.
#include "chain_util.h"

#include "kernels/reference/analysis.h"

namespace ops_batched_slabs_test {

namespace {

using tsfuse_test::Gen;
using tsfuse_test::sameAll;
using tsfuse_test::sameTensor;

const std::string kSq = "v1: sub($0, $1); mul(%0, %0)";

struct Budget {
  int64_t was = tsfuse::chainSlabElements(c10::Device(c10::kCPU));
  explicit Budget(int64_t elements) { tsfuse::setChainSlabElements(elements); }
  ~Budget() { tsfuse::setChainSlabElements(was); }
};

// Batched clouds x[b, i, 1, d], y[b, 1, j, d].
std::vector<at::Tensor> clouds(Gen& g, int64_t b, int64_t n, int64_t m, int64_t d) {
  return {g.tensor({b, n, 1, d}, at::kFloat), g.tensor({b, 1, m, d}, at::kFloat)};
}

std::optional<tsfuse::SlabPlan> planOf(const std::vector<at::Tensor>& ops, const std::vector<std::string>& stages) {
  const tsfuse::Chain c = tsfuse::Chain::parse(kSq, stages);
  const auto an = tsfuse::analyze(*c.expr, ops, &c.stages[0]);
  return an ? c.plan(ops, *an) : std::nullopt;
}

// The values with a budget that slices them, and with one that does not (one piece).
std::vector<at::Tensor> unsliced(const std::vector<at::Tensor>& ops, const std::vector<std::string>& stages) {
  const Budget whole(int64_t(1) << 30);
  return tsfuse_test::chained(ops, kSq, stages);
}

// Under the current budget: the plan slices dim `dim` (`step` indices a slab, unless -1), and the
// sliced chain gives the bits of the chain in one piece.
::testing::AssertionResult slicedAs(const std::vector<at::Tensor>& ops, const std::vector<std::string>& stages,
                                    int64_t dim, int64_t step = -1) {
  const auto plan = planOf(ops, stages);
  if (!plan) return ::testing::AssertionFailure() << "no slab plan";
  if (plan->pos[0] != dim)
    return ::testing::AssertionFailure() << "sliced along dim " << plan->pos[0] << ", not " << dim;
  if (step >= 0 && plan->step != step)
    return ::testing::AssertionFailure() << plan->step << " indices a slab, not " << step;
  return sameAll(unsliced(ops, stages), tsfuse_test::chained(ops, kSq, stages), /*exact=*/true);
}

TEST(BatchedSlabs, RowsAreSlicedWhereTwoMatricesPassTheBudget) {
  Gen g(61);
  const std::vector<std::string> stages{"sum(dim=[3], keepdim=False)", "amin(dim=[2], keepdim=False)"};
  const auto ops = clouds(g, 3, 40, 50, 3);
  {
    const Budget b(300);  // a matrix holds 2000 values, three rows of the batch 150
    EXPECT_TRUE(slicedAs(ops, stages, 1)) << "along the rows";
  }
  {
    const Budget b(5000);  // two matrices fit: along the batch, as before
    EXPECT_TRUE(slicedAs(ops, stages, 0)) << "along the batch";
  }
  const auto eager = tsfuse::evalChain(tsfuse::Chain::parse(kSq, stages), ops);
  EXPECT_TRUE(sameAll(eager, unsliced(ops, stages), /*exact=*/true));
}

TEST(BatchedSlabs, OneMatrixASlabWhereOnlyTheBatchIsKept) {
  Gen g(62);
  // Every stage keeps only the batch: slabs along it; one matrix (40 x 50 x 3 values) is larger
  // than any operand (3 x 50 x 3), so a slab may hold one.
  const std::vector<std::string> stages{"sum(dim=[3], keepdim=False)", "amin(dim=[2], keepdim=False)",
                                        "sum(dim=[1], keepdim=False)"};
  const auto ops = clouds(g, 4, 40, 50, 3);
  const Budget b(100);
  EXPECT_TRUE(slicedAs(ops, stages, 0, 1));
  // Where one matrix (2000 x 2 x 3 values) is not larger than an operand (x holds 4 x 2000 x 3),
  // two a slab.
  EXPECT_TRUE(slicedAs(clouds(g, 4, 2000, 2, 3), stages, 0, 2));
}

// The batched Chamfer distance's sweep (both minima of each matrix), sliced along the rows.
TEST(BatchedSlabs, BatchedChamferSweepsAreEagers) {
  Gen g(63);
  const std::vector<std::string> stages{"sum(dim=[3], keepdim=False)", "amin(dim=[2], keepdim=False)",
                                        "amin(dim=[1], keepdim=False)"};
  const auto ops = clouds(g, 3, 70, 90, 3);
  const Budget b(600);
  const auto got = tsfuse::reduceSweep(ops, kSq, stages);
  const at::Tensor d2 = ((ops[0] - ops[1]) * (ops[0] - ops[1])).sum(3);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(sameTensor(std::get<0>(d2.min(2)), got[0], /*exact=*/true));
  EXPECT_TRUE(sameTensor(std::get<0>(d2.min(1)), got[1], /*exact=*/true));
}

}  // namespace

}  // namespace ops_batched_slabs_test
