// Every TorchScript schema the registry (kernels/ir/ops.def) lists, generated from the schema
// itself: a graph computes d = a - b over broadcast operands, then calls the overload on d with
// constants for its other arguments; the pass must fuse both nodes into one tsfuse::pairwise
// (FileCheck: the overload is gone) with the registry's op in the expression, and the fused graph
// must return what the original returns, bit for bit.
#include "ir_util.h"

#include "registry/registry_util.h"

namespace registry_aten_overloads_test {

namespace {

using namespace tsfuse_test;

// The IR value for one schema argument: tensors read d (the first, and a later `self` or `first`:
// the in-place result of tsfuse::inplace_result(value, self) has self's shape, a cat's pieces
// tsfuse::cat_piece(x, first, ...) first's) or b (e for bool ops), bool conditions and masks read
// m = a > b; other arguments are constants of their type (ints 0: a cat's entry and dim).
std::string argumentValue(const c10::Argument& arg, bool& firstTensor, bool boolOps) {
  const std::string other = boolOps ? "%e" : "%b", number = boolOps ? "%two" : "%half";
  const std::string& name = arg.name();
  const c10::TypePtr& t = arg.type();
  if (name == "condition" || name == "mask") return "%m";
  // a ScalarType is an int in TorchScript; an optional one (zeros_like's) stays None
  if (name == "dtype") return t->cast<c10::OptionalType>() ? "%none" : "%f64";
  if (t->kind() == c10::TypeKind::TensorType) {
    const bool first = firstTensor;
    firstTensor = false;
    return first || name == "self" || name == "first" ? "%d" : other;
  }
  if (auto opt = t->cast<c10::OptionalType>()) {
    const c10::TypePtr& inner = opt->getElementType();
    if (inner->kind() == c10::TypeKind::TensorType) return other;
    if (inner->kind() == c10::TypeKind::NumberType) return "%half";
    if (inner->kind() == c10::TypeKind::StringType) return "%floor";
    return "%none";  // memory_format
  }
  if (t->kind() == c10::TypeKind::NumberType) return name == "alpha" || firstTensor ? "%two" : number;
  if (t->kind() == c10::TypeKind::StringType) return "%floor";
  if (t->kind() == c10::TypeKind::BoolType) return "%false";
  if (t->kind() == c10::TypeKind::DeviceObjType) return "%cpu";  // the operands' (to.device)
  if (t->kind() == c10::TypeKind::IntType || t->kind() == c10::TypeKind::MemoryFormatType) return "%zero";
  ADD_FAILURE() << "no test value for argument '" << name << "' of type " << t->str();
  return "%none";
}

TEST(RegistryOverloads, EveryListedSchemaFusesAndKeepsItsResults) {
  for (const tsfuse::AtenOverload& o : tsfuse::atenOverloads()) {
    const std::string key = o.schema;
    SCOPED_TRACE(key);
    const c10::FunctionSchema* found = schemaOf(o);
    ASSERT_NE(found, nullptr);
    const c10::FunctionSchema& schema = *found;
    // Tensors of the op's sample dtype: float (d = a - b, then b), or bool for the bitwise ops
    // (d = a > b, then e = a < b).
    const bool boolOps = sampleDtype(tsfuse::opDef(o.op)) == at::kBool;
    std::string call = schema.name() + "(";
    bool firstTensor = true;
    for (size_t i = 0; i < schema.arguments().size(); ++i) {
      // to(d, p): a cast's 0-dim prototype, as passes/prototype_casts.cpp makes it
      const bool prototype = o.op == tsfuse::Op::ToOther && schema.arguments()[i].name() == "other";
      call += (i ? ", " : "") +
              (prototype ? std::string("%proto") : argumentValue(schema.arguments()[i], firstTensor, boolOps));
    }
    call += ")";
    const std::string ir =
        R"IR(
graph(%a : Tensor, %b : Tensor):
  %none : NoneType = prim::Constant()
  %false : bool = prim::Constant[value=0]()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %half : float = prim::Constant[value=0.5]()
  %f64 : int = prim::Constant[value=7]()
  %floor : str = prim::Constant[value="floor"]()
  %cpu : Device = prim::Constant[value="cpu"]()
  %nosize : int[] = prim::ListConstruct()
  %proto : Tensor = aten::empty(%nosize, %f64, %none, %none, %none, %none)
  )IR" +
        std::string(boolOps ? "%d : Tensor = aten::gt(%a, %b)\n  %e : Tensor = aten::lt(%a, %b)\n  "
                            : "%d : Tensor = aten::sub(%a, %b, %one)\n  ") +
        std::string(call.find("%m") != std::string::npos ? "%m : Tensor = aten::gt(%a, %b)\n  " : "") +
        "%r : Tensor = " + call + "\n" +
        // An op that may return its input is never a region's root (fused, it
        // would return a copy): a consumer takes that place.
        (tsfuse::opDef(o.op).has(tsfuse::kMayAlias) ? "  %r2 : Tensor = aten::mul(%r, %two)\n  return (%r2)\n"
                                                    : "  return (%r)\n");
    SCOPED_TRACE(ir);
    auto g = parseGraph(ir);
    auto ref = g->copy();
    PassRun r = runPairwise(g);
    ASSERT_EQ(r.rewrites(), 1) << r.dump();
    const auto fused = findNodes(g, "tsfuse::pairwise");
    ASSERT_EQ(fused.size(), 1u) << r.ir;
    // An instruction after the first is the registry's op (or its form's variant: add_alpha).
    const std::string expr = exprOf(fused[0]);
    EXPECT_NE(expr.find(std::string("; ") + tsfuse::opName(o.op)), std::string::npos) << expr;
    EXPECT_TRUE(fileCheck(r.ir, [&](FileCheck& fc) { fc.check_not(schema.name() + "("); }));
    Gen gen(std::hash<std::string>()(key));
    EXPECT_TRUE(
        sameOutputs(ref, g, {gen.tensor({4, 1}, at::kFloat, kNaNInf), gen.tensor({1, 5}, at::kFloat, kNaNInf)}));
    EXPECT_TRUE(sameOutputs(ref, g, {gen.tensor({3, 1, 2}, at::kDouble), gen.tensor({4, 2}, at::kDouble)}));
  }
}

}  // namespace

}  // namespace registry_aten_overloads_test
