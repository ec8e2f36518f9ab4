// Python numbers known only at run time (a graph input, a module attribute, a size), generated from
// the registry: for every listed schema with a number argument (alpha aside), a graph passes a
// graph input there. At a tensor-or-number position the pass fuses it, reading the number through
// tsfuse::wrapped_number: as a 0-dim operand where the op's entry says ATen computes on a number as
// on the number wrapped (kRuntimeNumber), by value elsewhere (pow, clamp, clamp_min/max, where, masked_fill:
// kernels/runtime/bind_numbers.h). Either way the fused graph returns what eager's Scalar overload
// returns, bit for bit and dtype for dtype, or raises its error, for numbers of both kinds and
// every edge (NaN, inf, -0.0, denormals, float64 beyond float32, int64 beyond float32's integers)
// over float32, float64, int32 and bool tensors, each value in turn through the same graph (a
// kernel compiled for one value must not serve the next). (alpha takes constants only:
// tests/ir/negative_test.cpp.)
#include "ir_util.h"

#include "registry/registry_util.h"

namespace registry_runtime_number_test {

namespace {

using namespace tsfuse_test;

// A schema argument: a Python number (Scalar or Scalar?) other than alpha.
bool isNumber(const c10::Argument& arg) {
  c10::TypePtr t = arg.type();
  if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
  return t->kind() == c10::TypeKind::NumberType && arg.name() != "alpha";
}

// The IR value of argument i: %k for the runtime number, else what the overload test gives it
// (alpha: `alpha`, 1 for the plain op, 2 for its add_alpha / sub_alpha form).
std::string valueOf(const c10::FunctionSchema& s, size_t i, size_t runtime, bool& firstTensor, bool boolOps,
                    const std::string& alpha) {
  const c10::Argument& arg = s.arguments()[i];
  if (i == runtime) return "%k";
  const std::string& name = arg.name();
  if (name == "condition" || name == "mask") return "%m";
  c10::TypePtr t = arg.type();
  if (auto opt = t->cast<c10::OptionalType>()) {
    if (opt->getElementType()->kind() == c10::TypeKind::NumberType) return "%none";  // clamp's other bound
    if (opt->getElementType()->kind() == c10::TypeKind::StringType) return "%floor";
    if (opt->getElementType()->kind() != c10::TypeKind::TensorType) return "%none";  // *_like's options
    t = opt->getElementType();
  }
  if (t->kind() == c10::TypeKind::TensorType) {
    const bool first = firstTensor;
    firstTensor = false;
    return first ? "%d" : (boolOps ? "%e" : "%b");
  }
  if (t->kind() == c10::TypeKind::NumberType) return name == "alpha" ? alpha : "%two";
  if (t->kind() == c10::TypeKind::StringType) return "%floor";
  ADD_FAILURE() << "no test value for argument '" << name << "' of type " << t->str();
  return "%none";
}

// The outputs of `g` on `inputs`, or the error it raises (the message's last line: the lines
// before it are the interpreter's traceback, which names the graph's nodes).
struct Run {
  std::vector<c10::IValue> out;
  std::string error;
};
Run run(const std::shared_ptr<Graph>& g, const std::vector<c10::IValue>& inputs) {
  Run r;
  try {
    r.out = runGraph(g, inputs);
  } catch (const std::exception& e) {
    std::string what = e.what();
    while (!what.empty() && what.back() == '\n') what.pop_back();
    r.error = what.substr(what.rfind('\n') + 1);
  }
  return r;
}

::testing::AssertionResult sameRuns(const Run& want, const Run& got) {
  if (!want.error.empty() || !got.error.empty()) {
    if (want.error == got.error) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "eager: '" << want.error << "', fused: '" << got.error << "'";
  }
  return sameTensor(want.out.at(0).toTensor(), got.out.at(0).toTensor(), /*exact=*/true);
}

TEST(RegistryRuntimeNumbers, NumbersKnownAtRunTimeFuseWhereTheRegistrySaysAndKeepEagerResults) {
  const std::vector<c10::IValue> floats = {0.5, -0.0, std::nan(""), -INFINITY, 3.0, 1e-40, 1e300};
  const std::vector<c10::IValue> ints = {int64_t(2), int64_t(-3), int64_t(0), (int64_t(1) << 40) + 1};
  int fused = 0, byValue = 0;
  for (const tsfuse::AtenOverload& o : tsfuse::atenOverloads()) {
    const c10::FunctionSchema* found = schemaOf(o);
    ASSERT_NE(found, nullptr) << o.schema;
    const c10::FunctionSchema& schema = *found;
    const bool boolOps = sampleDtype(tsfuse::opDef(o.op)) == at::kBool;
    const tsfuse::OpDef& def = tsfuse::opDef(o.op);
    for (size_t runtime = 0; runtime < schema.arguments().size(); ++runtime) {
      if (!isNumber(schema.arguments()[runtime])) continue;
      // Plain forms keep the schema's argument order; the others (alpha, rounding_mode) put their
      // numbers at tensor-or-number positions, of ops that read them as operands.
      const bool readByValue = o.form == tsfuse::AtenForm::Plain && tsfuse::readsNumberByValue(o.op, runtime);
      const bool hasAlpha = schema.argumentIndexWithName("alpha").has_value();
      for (const char* type : {"float", "int"})
        for (const std::string alpha :
             hasAlpha ? std::vector<std::string>{"%one", "%two"} : std::vector<std::string>{""}) {
          if (boolOps && std::string(type) == "float") continue;  // ATen's bitwise ops take no float
          bool firstTensor = true;
          std::string call = schema.name() + "(";
          for (size_t i = 0; i < schema.arguments().size(); ++i)
            call += (i ? ", " : "") + valueOf(schema, i, runtime, firstTensor, boolOps, alpha);
          call += ")";
          const std::string ir =
              "graph(%a : Tensor, %b : Tensor, %k : " + std::string(type) + R"IR():
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %floor : str = prim::Constant[value="floor"]()
  %m : Tensor = aten::gt(%a, %b)
  )IR" +
              std::string(boolOps ? "%d : Tensor = aten::gt(%a, %b)\n  %e : Tensor = aten::lt(%a, %b)\n  "
                                  : "%d : Tensor = aten::sub(%a, %b, %one)\n  ") +
              "%r : Tensor = " + call + "\n  %r2 : Tensor = aten::mul(%r, %two)\n  return (%r2)\n";
          SCOPED_TRACE(ir);
          auto g = parseGraph(ir);
          auto ref = g->copy();
          PassRun r = runPairwise(g);
          ASSERT_EQ(r.rewrites(), 1) << r.dump();
          EXPECT_TRUE(fileCheck(r.ir, [&](FileCheck& fc) {
            fc.check("tsfuse::wrapped_number(%k)")->check("tsfuse::pairwise")->check_not(schema.name() + "(");
          }));
          ++fused;
          byValue += readByValue;
          Gen gen(std::hash<std::string>()(ir));
          for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kInt}) {
            const at::Tensor a = gen.tensor({4, 1}, dtype, kNaNInf), b = gen.tensor({1, 5}, dtype, kNaNInf);
            for (const c10::IValue& k : std::string(type) == "float" ? floats : ints) {
              SCOPED_TRACE(c10::str(c10::toString(dtype), " tensors, k = ", k));
              EXPECT_TRUE(sameRuns(run(ref, {a.clone(), b.clone(), k}), run(g, {a.clone(), b.clone(), k})));
            }
          }
        }
    }
  }
  // The forms there are: arithmetic, comparisons and bitwise ops fuse it as an operand; pow, clamp,
  // clamp_min, clamp_max, where and masked_fill read it by value.
  EXPECT_GE(fused, 30);
  EXPECT_GE(byValue, 10);
}

}  // namespace

}  // namespace registry_runtime_number_test
