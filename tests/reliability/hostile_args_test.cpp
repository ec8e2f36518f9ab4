// The fused ops called directly with hostile arguments: each raises a c10::Error with a clear
// message (tsfuse's own, or eager's where eager raises the same), never crashes, never reads out
// of bounds (the ASan build runs this file). Malformed expression text, operand counts and
// non-broadcasting shapes are covered in tests/ops/errors_autograd_test.cpp; here: devices, sizes
// that overflow, huge dims, reduction arguments, dtypes.
#include "test_util.h"

#include <limits>

namespace reliability_hostile_args_test {

namespace {

using namespace tsfuse_test;
using T = std::vector<at::Tensor>;

constexpr int64_t kBig = int64_t(1) << 40;

// A [n] float tensor of zeros that takes no memory: one element expanded with stride 0.
at::Tensor huge(std::vector<int64_t> sizes) {
  std::vector<int64_t> ones(sizes.size(), 1);
  return at::zeros(ones).expand(sizes);
}

// Both ops raise, with a message containing `fragment` (and, per errorOf, a c10::Error).
void expectBothRaise(const T& ops, const std::string& expr, const std::string& fragment,
                     const std::string& reduction = "sum") {
  SCOPED_TRACE(expr);
  std::string p = errorOf([&] { tsfuse::pairwise(ops, expr); });
  std::string r = errorOf([&] { tsfuse::reduce(ops, expr, reduction); });
  for (const std::string& err : {p, r}) {
    EXPECT_FALSE(err.empty()) << "did not raise";
    EXPECT_EQ(err.find("<non-c10"), std::string::npos) << err;
    EXPECT_NE(err.find(fragment), std::string::npos) << err;
  }
}

TEST(HostileArgs, MixedDevicesRaiseEagersDeviceError) {
  at::Tensor cpu = at::ones({3, 1}), meta = at::empty({1, 4}, at::TensorOptions().device(at::kMeta));
  std::string eager = errorOf([&] { at::sub(cpu, meta); });
  ASSERT_FALSE(eager.empty());
  for (const T& ops : {T{cpu, meta}, T{meta, cpu}}) {
    std::string p = errorOf([&] { tsfuse::pairwise(ops, "v1: sub($0, $1); abs(%0)"); });
    std::string r = errorOf([&] { tsfuse::reduce(ops, "v1: sub($0, $1); abs(%0)", "amax", std::vector<int64_t>{0}); });
    for (const std::string& err : {p, r}) {
      EXPECT_FALSE(err.empty());
      EXPECT_EQ(err.find("<non-c10"), std::string::npos) << err;
      EXPECT_NE(err.find("device"), std::string::npos) << err;
    }
  }
  // All on meta: shapes and dtypes only, like eager on meta.
  at::Tensor m2 = at::empty({3, 1}, at::TensorOptions().device(at::kMeta));
  at::Tensor out = tsfuse::pairwise({m2, meta}, "v1: sub($0, $1); mul(%0, 2)");
  EXPECT_TRUE(out.is_meta());
  EXPECT_EQ(out.sizes(), at::IntArrayRef({3, 4}));
  // A 0-dim CPU tensor mixes with any device, as in eager.
  at::Tensor mixed = tsfuse::pairwise({meta, at::scalar_tensor(2.0)}, "v1: mul($0, $1)");
  EXPECT_TRUE(mixed.is_meta());
}

TEST(HostileArgs, OutputsWhoseSizeOverflowsRaise) {
  // [2^40, 1] x [1, 2^40] -> 2^80 elements: no int64 can count them; eager raises on allocation.
  T ops = {huge({kBig, 1}), huge({1, kBig})};
  std::string eager = errorOf([&] { at::sub(ops[0], ops[1]); });
  ASSERT_FALSE(eager.empty());
  expectBothRaise(ops, "v1: sub($0, $1); abs(%0)", "overflow");
  expectBothRaise(ops, "v1: sub($0, $1); abs(%0)", "overflow", "argmax");
  // 2^32 x 2^31 = 2^63: one past int64's range.
  T edge = {huge({int64_t(1) << 32, 1}), huge({1, int64_t(1) << 31})};
  expectBothRaise(edge, "v1: mul($0, $1)", "overflow");
  // Three operands whose pairwise broadcast fits int64 but whose product does not: eager's error
  // for the first intermediate (it cannot be allocated).
  T three = {huge({int64_t(1) << 30, 1, 1}), huge({1, int64_t(1) << 30, 1}), huge({1, 1, int64_t(1) << 30})};
  expectBothRaise(three, "v1: add($0, $1); add(%0, $2)", "allocate");
}

TEST(HostileArgs, HugeOutputsThatCannotBeAllocatedRaise) {
  // 2^48 float32 elements (1 PiB) fit int64 but no address space: the allocator's error, not a
  // crash (and not an OOM kill: even with overcommit the mapping cannot exist).
  T ops = {huge({int64_t(1) << 46, 1}), huge({1, 4})};
  for (const std::string& err : {errorOf([&] { tsfuse::pairwise(ops, "v1: sub($0, $1)"); }), errorOf([&] {
                                   tsfuse::reduce(ops, "v1: sub($0, $1)", "sum", std::vector<int64_t>{1});
                                 })}) {
    EXPECT_FALSE(err.empty());
    EXPECT_EQ(err.find("<non-c10"), std::string::npos) << err;
  }
}

TEST(HostileArgs, HugeDimsWithSmallResultsAreExact) {
  // Reductions over a huge broadcast run in O(output) memory: a [2^40] x [1] sum is exact.
  at::Tensor x = at::ones({1}).expand({int64_t(1) << 24});
  at::Tensor y = at::full({1}, 2.0);
  at::Tensor got = tsfuse::reduce({x, y}, "v1: mul($0, $1); lt(%0, 3)", "sum");
  EXPECT_EQ(got.item<int64_t>(), int64_t(1) << 24);
  // Size-0 dims next to huge ones: empty output, eager's layout.
  T ops = {huge({kBig, 1}), at::ones({1, 0})};
  at::Tensor empty = tsfuse::pairwise(ops, "v1: sub($0, $1)");
  EXPECT_EQ(empty.sizes(), at::IntArrayRef({kBig, 0}));
}

TEST(HostileArgs, BadReductionDimsRaise) {
  T ops = {at::rand({3, 1}), at::rand({1, 4})};
  const std::string e = "v1: sub($0, $1)";
  auto raises = [&](const std::string& red, std::vector<int64_t> dim, const std::string& fragment) {
    SCOPED_TRACE(red + " dim " + c10::str(at::IntArrayRef(dim)));
    std::string err = errorOf([&] { tsfuse::reduce(ops, e, red, dim); });
    EXPECT_FALSE(err.empty());
    EXPECT_EQ(err.find("<non-c10"), std::string::npos) << err;
    EXPECT_NE(err.find(fragment), std::string::npos) << err;
  };
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  for (const std::string& red : {"sum", "mean", "amax", "amin", "any", "all"}) {
    raises(red, {2}, "out of range");
    raises(red, {-3}, "out of range");
    raises(red, {lo}, "out of range");
    raises(red, {hi}, "out of range");
    raises(red, {0, -2}, "multiple times");
  }
  for (const std::string& red : {"prod", "argmax", "argmin"}) {
    raises(red, {5}, "out of range");
    raises(red, {lo}, "out of range");
    raises(red, {0, 1}, "one dim");
  }
  // In-range negative dims are valid: the same result as the positive dim.
  EXPECT_TRUE(at::equal(tsfuse::reduce(ops, e, "sum", std::vector<int64_t>{-1}),
                        tsfuse::reduce(ops, e, "sum", std::vector<int64_t>{1})));
}

TEST(HostileArgs, BogusReductionNamesRaise) {
  T ops = {at::rand({3, 1}), at::rand({1, 4})};
  for (const std::string& name : std::vector<std::string>{"", "SUM", "sum ", "median", "maximum",
                                                          std::string("sum\0x", 5), std::string(4096, 'a')}) {
    std::string err = errorOf([&] { tsfuse::reduce(ops, "v1: sub($0, $1)", name); });
    EXPECT_NE(err.find("unknown reduction"), std::string::npos) << err;
  }
  for (const std::string& name : {"max:2", "sum:1", "norm:", "norm:2x", "var:", "std:1x", "var:1:2", "amax:2",
                                  "amin:index:index", "amax:index"}) {
    std::string err = errorOf([&] { tsfuse::reduce(ops, "v1: sub($0, $1)", name); });  // dim=None
    EXPECT_TRUE(err.find("only norm, var, std, amax and amin take a parameter") != std::string::npos ||
                err.find("amax/amin take only ':index'") != std::string::npos ||
                err.find("malformed norm order") != std::string::npos ||
                err.find("malformed correction") != std::string::npos)
        << err;
  }
}

TEST(HostileArgs, BogusDtypesRaise) {
  T ops = {at::rand({3, 1}), at::rand({1, 4})};
  for (at::ScalarType dt : {at::ScalarType::Undefined, at::ScalarType::QInt8, at::ScalarType::NumOptions,
                            static_cast<at::ScalarType>(200)}) {
    SCOPED_TRACE(static_cast<int>(dt));
    std::string err = errorOf([&] { tsfuse::reduce(ops, "v1: sub($0, $1)", "sum", std::nullopt, false, dt); });
    EXPECT_FALSE(err.empty());
    EXPECT_EQ(err.find("<non-c10"), std::string::npos) << err;
  }
  // dtype where the reduction takes none (eager's message), and a narrowing one.
  std::string err = errorOf([&] { tsfuse::reduce(ops, "v1: sub($0, $1)", "mean", std::nullopt, false, at::kLong); });
  EXPECT_FALSE(err.empty());
  // Operands of dtypes the expression language has no name for still compute (through ATen).
  T q = {at::ones({2, 1}, at::kComplexFloat), at::ones({1, 3}, at::kComplexFloat)};
  EXPECT_EQ(tsfuse::pairwise(q, "v1: add($0, $1)").scalar_type(), at::kComplexFloat);
}

TEST(HostileArgs, PathologicalExpressionsRaiseOrCompute) {
  at::Tensor a = at::rand({3, 1}), b = at::rand({1, 4});
  // Very long expressions: 10k instructions parse and evaluate.
  std::string longExpr = "v1: add($0, $1)";
  for (int k = 0; k < 10000; ++k) longExpr += "; add(%" + std::to_string(k) + ", 1)";
  at::Tensor out = tsfuse::pairwise({a, b}, longExpr);
  EXPECT_TRUE(at::allclose(out, a + b + 10000));
  // Deeply nested garbage and huge text: a clear error, not a stack overflow.
  std::string deep = "v1: " + std::string(100000, '(');
  EXPECT_NE(errorOf([&] { tsfuse::pairwise({a, b}, deep); }).find("tsfuse expr"), std::string::npos);
  std::string longName = "v1: " + std::string(1 << 20, 'x') + "($0)";
  EXPECT_NE(errorOf([&] { tsfuse::pairwise({a}, longName); }).find("unknown op"), std::string::npos);
  // Undefined operand, operands given to an expression that names none of them.
  // Every fused entry point names the undefined operand.
  const at::Tensor none;
  const std::string sq = "v1: sub($0, $1); mul(%0, %0)";
  const std::vector<std::string> sumThenMin{"sum(dim=[2], keepdim=False)", "amin(dim=[1], keepdim=False)"};
  const std::vector<std::string> sweep{"sum(dim=[2], keepdim=False)", "amin(dim=[1], keepdim=False)",
                                       "amin(dim=[0], keepdim=False)"};
  for (const std::string& err : {errorOf([&] {
                                   tsfuse::pairwise({a, none}, "v1: add($0, $1)");
                                 }),
                                 errorOf([&] {
                                   tsfuse::reduce({none, b}, "v1: add($0, $1)", "sum");
                                 }),
                                 errorOf([&] {
                                   tsfuse::softmax({a, none}, "v1: add($0, $1)", 0);
                                 }),
                                 errorOf([&] {
                                   tsfuse::reduceChain({none, b}, sq, sumThenMin);
                                 }),
                                 errorOf([&] {
                                   tsfuse::reduceSweep({a, none}, sq, sweep);
                                 })})
    EXPECT_NE(err.find("is an undefined tensor"), std::string::npos) << err;
  EXPECT_NE(errorOf([&] { tsfuse::pairwise({a}, "v1: abs($1)"); }).find("takes 2 operands, got 1"), std::string::npos);
  // Error messages quote at most an excerpt of a huge text.
  EXPECT_LT(errorOf([&] { tsfuse::pairwise({a}, longName); }).size(), 1000u);
}

}  // namespace

}  // namespace reliability_hostile_args_test
