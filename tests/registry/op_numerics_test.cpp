// Numerics of every op in the registry (kernels/ir/ops.def), generated from its entry: for each op,
// every argument form its signature allows (tensors of several dtypes, Python numbers, None, a
// dtype) over broadcast operands with NaN and inf, the fused op must return exactly what the
// op's ATen reference returns (same dtype, shape, strides and bits) or raise eager's error, on
// the native CPU path. An op added to the registry is covered here with no test to write.
#include "registry_util.h"
#include "test_util.h"

#include "kernels/reference/aten_eval.h"
#include "kernels/backends/cpu/vml.h"
#include "kernels/ir/op_registry.h"

namespace registry_op_numerics_test {

namespace {

using namespace tsfuse_test;
using tsfuse::Arg;

// The choices for one argument of a signature character. The first argument is always a tensor
// (an expression needs one, and every ATen overload has a tensor there or after a number).
std::vector<Arg> choices(char kind, size_t position) {
  // 1 and 0 too: exponents ATen computes as a copy and a fill (the Square rule's forms).
  const std::vector<Arg> numbers = {Arg::integer(2), Arg::floating(0.5), Arg::integer(1), Arg::floating(0.0)};
  std::vector<Arg> c;
  switch (kind) {
    case 'v':
      c = {Arg::input(0)};
      if (position > 0) c.insert(c.end(), numbers.begin(), numbers.end());
      break;
    case 'o':
      c = {Arg::input(0), Arg::none(), Arg::floating(0.5)};
      break;
    case 's':
      c = {Arg::integer(2), Arg::floating(1.5)};
      break;
    case 'd':
      c = {Arg::scalarType(at::kDouble), Arg::scalarType(at::kInt)};
      break;
    case 'c':
      c = {Arg::onDevice(c10::kCPU)};  // the operands' device
      break;
    case 'p':
      c = {Arg::input(0)};  // a 0-dim prototype (below)
      break;
    default:
      ADD_FAILURE() << "unknown signature character '" << kind << "'";
  }
  return c;
}

// An op the native CPU path computes with ATen's own kernel on each contiguous tile, where that
// kernel is not MKL's vector math (whose bits do not depend on the layout: kernels/backends/cpu/vml.h):
// pow other than a square, sigmoid, log1p, hypot, ... ATen's vector loop of those (SLEEF) and its
// scalar loop (libm), each within 1 ulp of the exact value, differ by up to 2, and eager takes the
// scalar loop for rows shorter than a vector, which these layouts' rows are; the contract there is
// 2 ulps (docs/exactness.md; tests/fuzz/compare.py's aten_on_tile_2ulp).
bool eagerBitsFollowTheLayout(const tsfuse::OpDef& def) {
  return (def.rule == tsfuse::LowerRule::Aten || def.rule == tsfuse::LowerRule::Square) &&
         !tsfuse::cpu::vmlRoutine(def.op, at::kFloat);
}

// Each op's cases come from a generator seeded by its name, so that adding an op to the registry
// leaves every other op's cases as they were.
uint64_t seedOf(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

TEST(RegistryOps, EveryOpMatchesItsAtenReferenceOnTheNativePath) {
  const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kDouble, at::kInt, at::kBool};
  // Broadcast layouts: an outer product, a shared trailing dim with a 0-dim operand, an empty one.
  const std::vector<std::vector<std::vector<int64_t>>> layouts = {
      {{4, 1}, {1, 5}, {5}}, {{3, 1, 2}, {}, {4, 2}}, {{0, 1}, {1, 5}, {1}}};
  int covered = 0;
  for (const tsfuse::OpDef& def : tsfuse::allOps()) {
    SCOPED_TRACE(def.name);
    Gen gen(seedOf(def.name));
    CheckOpts opts{true, 0, 0, nullptr};
    if (eagerBitsFollowTheLayout(def)) opts = CheckOpts{false, 2.4e-7, 0, nullptr};  // 2 float32 ulps
    FailureLog log;
    int ran = 0;
    for (const auto& args : argumentForms(def, choices)) {
      tsfuse::Expr e;
      e.instrs.push_back({def.op, args});
      for (const Arg& a : args) e.numInputs += a.kind == Arg::Kind::Input;
      try {
        e.validate();
      } catch (const c10::Error&) {
        continue;  // a form the expression language rejects (e.g. a tensor and a number bound)
      }
      const std::string text = e.str();
      // Each tensor operand in turn takes every dtype; the others the first dtype of the sweep.
      for (const auto& shapes : layouts)
        for (int slot = 0; slot < std::max(e.numInputs, 1); ++slot)
          for (at::ScalarType t : dtypes) {
            std::vector<at::Tensor> ops;
            for (int i = 0; i < e.numInputs; ++i)
              ops.push_back(gen.tensor(isPrototype(def, args, i) ? std::vector<int64_t>{} : shapes[i],
                                       i == slot ? t : dtypes[(i + 1) % dtypes.size()], kNaNInf));
            ++ran;
            log.add(checkPairwise(text, ops, [&](const std::vector<at::Tensor>& x) { return tsfuse::evalAten(e, x); },
                                  {opts.exact, opts.rtol, opts.atol, ops[0].numel() == 0 ? "empty" : "native"}),
                    text + ": ");
          }
    }
    EXPECT_GT(ran, 0) << "no argument form of " << def.name << " was run";
    EXPECT_TRUE(log.result());
    covered += ran > 0;
  }
  EXPECT_EQ(covered, static_cast<int>(tsfuse::allOps().size()));
}

// The registry's own consistency: names round-trip through the parser, every Map rule names a
// primitive (tests/registry/aten_overloads_test.cpp checks the ATen schemas).
TEST(RegistryOps, EntriesAreConsistent) {
  for (const tsfuse::OpDef& def : tsfuse::allOps()) {
    tsfuse::Op parsed;
    ASSERT_TRUE(tsfuse::opFromName(def.name, parsed)) << def.name;
    EXPECT_EQ(parsed, def.op) << def.name;
    if (def.rule == tsfuse::LowerRule::Map) EXPECT_TRUE(def.prim().has_value()) << def.name;
    if (def.rule == tsfuse::LowerRule::Aten) EXPECT_FALSE(def.prim().has_value()) << def.name;
    EXPECT_GT(def.arity(), 0) << def.name;
  }
}

}  // namespace

}  // namespace registry_op_numerics_test
