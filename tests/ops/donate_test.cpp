// A fused op's `donated` operands (kernels/runtime/donation.h, takeDonated): the result is written over
// a donated operand only where that is unobservable (nothing else holds the tensor or its memory)
// and the layout is the output's; everything else computes into a fresh tensor, values unchanged.
// Every checkPairwise in the suite also repeats its call with a donated operand (tests/test_util.h).
#include "test_util.h"

#include "kernels/reference/aten_eval.h"
#include "kernels/runtime/fused_call.h"

namespace ops_donate_test {

namespace {

using tsfuse_test::callBoxed;
using tsfuse_test::pairwiseBoxed;
using tsfuse_test::sameTensor;

const std::string kAbsDiff = "v1: sub($0, $1); abs(%0); mul(%1, 3)";

// The operands, the list their only holder (an initializer list would keep a copy of each alive
// for the whole call).
std::vector<at::Tensor> owned(at::Tensor a, at::Tensor b) {
  std::vector<at::Tensor> v;
  v.push_back(std::move(a));
  v.push_back(std::move(b));
  return v;
}

at::Tensor eagerAbsDiff(const at::Tensor& a, const at::Tensor& b) { return at::abs(a - b) * 3; }

TEST(Donated, AnOperandNothingElseHoldsTakesTheResult) {
  tsfuse_test::Gen g(1);
  for (at::ScalarType dt : {at::kFloat, at::kDouble, at::kInt}) {
    at::Tensor a = g.tensor({64, 300}, dt), b = g.tensor({1, 300}, dt);
    at::Tensor want = eagerAbsDiff(a, b);
    at::Tensor mine = a.clone();
    const void* memory = mine.data_ptr();
    at::Tensor out = pairwiseBoxed(owned(std::move(mine), b), kAbsDiff, {0});
    EXPECT_EQ(out.data_ptr(), memory) << dt;
    EXPECT_TRUE(sameTensor(want, out, true)) << dt;
  }
}

// torch.cdist returns a view whose base only the view's record holds: that base is part of it.
TEST(Donated, AViewWhoseBaseNothingElseHoldsTakesTheResult) {
  tsfuse_test::Gen g(6);
  at::Tensor a = g.tensor({64, 300}, at::kFloat), b = g.tensor({1, 300}, at::kFloat);
  at::Tensor view = a.clone().view({64 * 300}).view({64, 300});
  ASSERT_TRUE(view.is_view());
  const void* memory = view.data_ptr();
  at::Tensor out = pairwiseBoxed(owned(std::move(view), b), kAbsDiff, {0});
  EXPECT_EQ(out.data_ptr(), memory);
  EXPECT_TRUE(sameTensor(eagerAbsDiff(a, b), out, true));
  // The base still held: left alone.
  at::Tensor base = a.clone();
  at::Tensor out2 = pairwiseBoxed(owned(base.view({64, 300}), b), kAbsDiff, {0});
  EXPECT_NE(out2.data_ptr(), base.data_ptr());
  EXPECT_TRUE(sameTensor(a, base, true));
}

TEST(Donated, AnOperandHeldElsewhereIsLeftAlone) {
  tsfuse_test::Gen g(2);
  at::Tensor a = g.tensor({64, 300}, at::kFloat), b = g.tensor({1, 300}, at::kFloat);
  at::Tensor kept = a.clone();
  at::Tensor held = a.clone();  // the caller still holds it: three handles in the call
  at::Tensor out = pairwiseBoxed(owned(held, b), kAbsDiff, {0});
  EXPECT_NE(out.data_ptr(), held.data_ptr());
  EXPECT_TRUE(sameTensor(kept, held, true));
  EXPECT_TRUE(sameTensor(eagerAbsDiff(a, b), out, true));
  // A view of it alive: the storage has another owner.
  at::Tensor base = a.clone();
  at::Tensor row = base[0];
  at::Tensor out2 = pairwiseBoxed(owned(std::move(base), b), kAbsDiff, {0});
  EXPECT_NE(out2.data_ptr(), row.data_ptr());
  EXPECT_TRUE(sameTensor(a[0], row, true));
}

// An application's buffer wrapped without a copy (from_blob) may be read again by its owner.
TEST(Donated, MemoryNotFromAtensAllocatorIsLeftAlone) {
  tsfuse_test::Gen g(7);
  at::Tensor a = g.tensor({64, 300}, at::kFloat), b = g.tensor({1, 300}, at::kFloat);
  std::vector<float> buffer(a.data_ptr<float>(), a.data_ptr<float>() + a.numel());
  at::Tensor out = pairwiseBoxed(owned(at::from_blob(buffer.data(), {64, 300}), b), kAbsDiff, {0});
  EXPECT_NE(out.data_ptr(), static_cast<void*>(buffer.data()));
  EXPECT_TRUE(sameTensor(a, at::from_blob(buffer.data(), {64, 300}), true));
  EXPECT_TRUE(sameTensor(eagerAbsDiff(a, b), out, true));
}

TEST(Donated, OnlyTheOutputsLayoutIsTaken) {
  tsfuse_test::Gen g(3);
  // int operand, float result; a broadcast operand; a transposed one eager lays out differently
  // from the output (the first operand's layout wins): none is written.
  at::Tensor i = g.tensor({8, 5}, at::kInt), f = g.tensor({1, 5}, at::kFloat);
  at::Tensor ic = i.clone();
  const void* im = ic.data_ptr();
  at::Tensor o1 = pairwiseBoxed(owned(std::move(ic), f), "v1: mul($0, $1); add(%0, 0.5)", {0});
  EXPECT_NE(o1.data_ptr(), im);
  EXPECT_TRUE(sameTensor(i * f + 0.5, o1, true));
  at::Tensor bc = f.clone();
  const void* bm = bc.data_ptr();
  at::Tensor o2 = pairwiseBoxed(owned(i.to(at::kFloat), std::move(bc)), "v1: sub($0, $1); abs(%0)", {1});
  EXPECT_NE(o2.data_ptr(), bm);
  EXPECT_TRUE(sameTensor(at::abs(i.to(at::kFloat) - f), o2, true));
  at::Tensor t = g.tensor({5, 8}, at::kFloat).t(), d = g.tensor({8, 5}, at::kFloat);
  at::Tensor want = at::abs(d - t);
  ASSERT_NE(want.strides(), t.strides());
  at::Tensor tc = t.clone(at::MemoryFormat::Preserve);
  const void* tm = tc.data_ptr();
  at::Tensor o3 = pairwiseBoxed(owned(d, std::move(tc)), "v1: sub($0, $1); abs(%0)", {1});
  EXPECT_NE(o3.data_ptr(), tm);
  EXPECT_TRUE(sameTensor(want, o3, true));
}

TEST(Donated, UndonatedOperandsAreNeverWritten) {
  tsfuse_test::Gen g(4);
  at::Tensor a = g.tensor({64, 300}, at::kFloat), b = g.tensor({1, 300}, at::kFloat);
  at::Tensor mine = a.clone();
  const void* memory = mine.data_ptr();
  at::Tensor out = pairwiseBoxed(owned(std::move(mine), b), kAbsDiff, {});
  EXPECT_NE(out.data_ptr(), memory);
  EXPECT_NE(
      tsfuse_test::errorOf([&] { pairwiseBoxed(owned(a, b), kAbsDiff, {2}); }).find("donated operand 2 out of range"),
      std::string::npos);
}

// A float sum of a value no larger than its operand is ATen's (eager's order) over the stored
// value: donated, the operand's memory holds that value, so the call holds no more than the
// unfused graph; the epilogue then runs over the reduced value in its memory.
TEST(Donated, TheStoredValueOfAnAtenReductionTakesTheOperand) {
  tsfuse_test::Gen g(5);
  at::Tensor x = g.tensor({6, 40, 50}, at::kFloat), s = g.tensor({1}, at::kFloat);
  const std::string expr = "v1: sin($0); pow(%0, 2.0); mul(%1, -2.0)";
  at::Tensor value = (at::sin(x).pow(2.0) * -2.0);
  for (bool epilogue : {false, true}) {
    at::Tensor mine = x.clone();
    const void* memory = mine.data_ptr();
    std::vector<at::Tensor> alone;  // (a braced list would keep a copy alive)
    alone.push_back(std::move(mine));
    at::Tensor out =
        epilogue ? callBoxed("tsfuse::reduce", owned(std::move(alone[0]), s), expr, "sum", std::vector<int64_t>{0},
                             false, c10::IValue(), "v1: mul($0, $1); exp(%0)", std::vector<int64_t>{0, 1})
                 : callBoxed("tsfuse::reduce", std::move(alone), expr, "sum", std::vector<int64_t>{0}, false,
                             c10::IValue(), c10::IValue(), std::vector<int64_t>{0});
    EXPECT_STREQ(tsfuse::lastPath(), "aten");
    // Without an epilogue the last donation is the operand's; with one, the reduced value's.
    EXPECT_EQ(tsfuse::lastDonatedMemory(), epilogue ? out.data_ptr() : memory);
    EXPECT_TRUE(sameTensor(epilogue ? at::exp(value.sum({0}) * s) : value.sum({0}), out, true));
  }
}

// A matmul-expanded distance: the row norms are the reduction, |x|^2 - 2 x @ y^T its epilogue over
// the matmul's result, which the graph donates (nothing reads it after): the epilogue's output is
// written over it, so the call holds the output alone, as eager's in-place tail would.
TEST(Donated, AReductionsEpilogueTakesADonatedEpilogueOperand) {
  tsfuse_test::Gen g(7);
  const at::Tensor x = g.tensor({300, 8}, at::kFloat), y = g.tensor({200, 8}, at::kFloat);
  const at::Tensor want = x.pow(2).sum({1}, true) - at::matmul(x, y.t()) * 2.0;
  for (bool heldElsewhere : {false, true}) {
    at::Tensor xy = at::matmul(x, y.t());
    const at::Tensor keep = heldElsewhere ? xy : at::Tensor();
    const void* memory = xy.data_ptr();
    at::Tensor out =
        callBoxed("tsfuse::reduce", owned(x, std::move(xy)), "v1: pow($0, 2)", "sum", std::vector<int64_t>{1}, true,
                  c10::IValue(), "v1: mul($1, 2.0); sub($0, %0)", std::vector<int64_t>{1});
    EXPECT_EQ(out.data_ptr() == memory, !heldElsewhere) << heldElsewhere;
    EXPECT_TRUE(sameTensor(want, out, true)) << heldElsewhere;
    if (heldElsewhere) EXPECT_TRUE(sameTensor(at::matmul(x, y.t()), keep, true));
  }
}

// A call whose numbers are read by value hands its operands on, bound (kernels/runtime/bind_numbers.h): the
// bound call's list holds the donated operand too, and the result is still written over it; the
// same with the clamp's cost hoisted first (an atan over [1, M] feeding an [N, M] program), where
// two lists are handed on.
TEST(Donated, ABoundCallStillTakesTheDonatedOperand) {
  tsfuse_test::Gen g(3);
  const at::Tensor a = g.tensor({256, 300}, at::kFloat), b = g.tensor({1, 300}, at::kFloat);
  for (const std::string expr :
       {"v1: sub($0, $1); clamp(%0, $2, None)", "v1: atan($1); sub($0, %0); clamp(%1, $2, None)"}) {
    SCOPED_TRACE(expr);
    at::Tensor mine = a.clone();
    const void* memory = mine.data_ptr();
    std::vector<at::Tensor> ops = owned(std::move(mine), b);
    ops.push_back(tsfuse::wrappedNumber(0.25));
    at::Tensor out = pairwiseBoxed(std::move(ops), expr, {0});
    EXPECT_EQ(out.data_ptr(), memory);
    const at::Tensor d = expr.find("atan") != std::string::npos ? a - at::atan(b) : a - b;
    EXPECT_TRUE(sameTensor(at::clamp(d, 0.25), out, true));
  }
}

}  // namespace

}  // namespace ops_donate_test
