// docs/ops.md, the table of every fusible op, is generated from the registry (kernels/ir/ops.def)
// and from what the one lowering (kernels/lower/lower.cpp) actually emits for each op over float32
// operands on each target. This test fails when the page is out of date; regenerate it with
//   TSFUSE_UPDATE_DOCS=1 build/bin/tsfuse_tests --gtest_filter=RegistryTable.*
#include "test_util.h"

#include "kernels/lower/program.h"
#include "registry/registry_util.h"

#include <fstream>
#include <map>
#include <sstream>

namespace registry_ops_table_test {

namespace {

using tsfuse_test::sampleDtype;
using tsfuse_test::sampleOf;
namespace lower = tsfuse::lower;

// How the op runs on a target, as the lowering decides it.
std::string howItRuns(const tsfuse::Expr& e, const std::vector<at::Tensor>& ops, const tsfuse::Analysis& an,
                      const lower::Target& target, tsfuse::PrimFlag emitter) {
  std::string why;
  auto p = lower::lowerExpr(e, an, ops, target, &why);
  if (!p) return "—";
  bool aten = false, all = true;
  for (const auto& li : p->code) {
    aten |= li.op == tsfuse::Prim::Aten;
    all &= tsfuse::primHas(li.op, emitter);
  }
  if (aten) return "ATen on tiles";
  return all ? "native" : "—";
}

// How a Python number known only at run time is taken where the op's schemas have one (alpha and
// rounding_mode aside): as an operand (kRuntimeNumber), by value (bound per value), or not at all.
std::string runtimeNumberOf(const tsfuse::OpDef& def) {
  if (def.has(tsfuse::kRuntimeNumber)) return "operand";
  std::string how;
  for (const tsfuse::AtenOverload& o : tsfuse::atenOverloads()) {
    if (o.op != def.op || o.form != tsfuse::AtenForm::Plain) continue;
    const c10::FunctionSchema* schema = tsfuse_test::schemaOf(o);
    if (!schema) continue;
    const auto& args = schema->arguments();
    for (size_t i = 0; i < args.size() && i < static_cast<size_t>(def.arity()); ++i) {
      c10::TypePtr t = args[i].type();
      if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
      if (t->kind() != c10::TypeKind::NumberType) continue;
      if (tsfuse::readsNumberByValue(def.op, i))
        how = "by value";
      else if (how.empty())
        how = "constant only";
    }
  }
  return how;
}

std::string renderTable() {
  std::map<tsfuse::Op, std::vector<std::string>> schemas;
  for (const auto& o : tsfuse::atenOverloads()) schemas[o.op].push_back(o.schema);
  std::ostringstream os;
  os << "# Fusible elementwise ops\n\n"
     << "Generated from the op registry ([kernels/ir/ops.def](../kernels/ir/ops.def)) and from what the\n"
     << "typed lowering emits for each op over float32 operands (bool where marked: ATen has the bitwise\n"
     << "ops for bools and integers only; `tests/registry/ops_table_test.cpp`\n"
     << "checks that this page is current). *native*: the target's own primitives; *ATen on tiles*: the\n"
     << "CPU runs ATen's kernel on each 512-element tile (eager's bits); *—*: the target declines and the\n"
     << "call takes the exact chunked ATen path. Other dtypes can differ (e.g. `square` of an integer\n"
     << "tensor runs through ATen). Where ATen's kernel for float/double `exp`, `log`, `log2`, `log10`,\n"
     << "`sqrt`, `sin`, `cos`, `tan`, `tanh`, `atan`, `acos`, `asin`, `erf` or `erfc` is Intel MKL's vector\n"
     << "math (the x86-64 wheels), the tile calls that MKL routine directly, with\n"
     << "ATen's mode, after checking its bits against ATen's once (`kernels/backends/cpu/vml.h`); so does\n"
     << "`pow` with a number exponent for SLEEF's pow, the routine ATen's AVX2 / AVX-512 kernel calls\n"
     << "(exponents 3, -2 and -1 are products and quotients, as in ATen: native); `acosh`, `asinh`, `floor`,\n"
     << "`ceil`, `trunc` and `round` call the C library's function on each value (ATen's kernel for `acosh` and\n"
     << "`asinh`; a rounding has one correct result), checked the same way.\n"
     << "*Runtime number*: how a Python number argument known only at run time (a graph input, a\n"
     << "module attribute, a size) is fused (`tsfuse::wrapped_number`; `tests/registry/runtime_number_test.cpp`).\n"
     << "*operand*: ATen computes the op on a number as on the number wrapped in a 0-dim tensor, so the\n"
     << "fused op reads it as a tensor, one kernel for every value. *by value*: the op runs other code on a\n"
     << "number (a multiply for `x ** 2`, a NaN bound, a checked conversion), so each call writes the\n"
     << "number into the program as a literal first (`kernels/runtime/bind_numbers.h`): a new value is lowered\n"
     << "again, and shares its compiled kernel (kernels take their literals with each call).\n"
     << "`alpha` and `rounding_mode` must be constants, else the region ends at the op.\n"
     << "How to add an op: [adding-an-op.md](adding-an-op.md).\n\n"
     << "| op | TorchScript schemas | CPU interpreter | CPU JIT (AVX2) | CUDA (generated) | runtime number |\n"
     << "| --- | --- | --- | --- | --- | --- |\n";
  for (const tsfuse::OpDef& def : tsfuse::allOps()) {
    tsfuse::Expr e = sampleOf(def);
    const at::ScalarType dtype = sampleDtype(def);
    std::vector<at::Tensor> ops;
    for (int i = 0; i < e.numInputs; ++i) ops.push_back(at::ones({2}, dtype));
    if (def.op == tsfuse::Op::Where) ops[0] = ops[0].to(at::kBool);
    if (def.op == tsfuse::Op::MaskedFill) ops[1] = ops[1].to(at::kBool);
    auto an = tsfuse::analyze(e, ops, nullptr);
    std::string names;
    for (const auto& s : schemas[def.op]) names += (names.empty() ? "" : ", ") + std::string("`") + s + "`";
    if (names.empty()) names = "(the `alpha` / `rounding_mode` form of a schema above)";
    os << "| `" << def.name << "`" << (dtype == at::kBool ? " (bool)" : "") << " | " << names << " | ";
    const std::string runtimeNumber = runtimeNumberOf(def);
    if (!an) {
      os << "? | ? | ? | " << runtimeNumber << " |\n";
      continue;
    }
    const std::string cpu = howItRuns(e, ops, *an, lower::Target::cpuTiles(), tsfuse::kInterp);
    const std::string jit = cpu == "native" ? howItRuns(e, ops, *an, lower::Target::cpuTiles(), tsfuse::kJit) : "—";
    os << cpu << " | " << jit << " | " << howItRuns(e, ops, *an, lower::Target::device(), tsfuse::kDevice) << " | "
       << runtimeNumber << " |\n";
  }
  return os.str();
}

TEST(RegistryTable, DocsOpsPageIsCurrent) {
  const std::string path = std::string(TSFUSE_SOURCE_DIR) + "/docs/ops.md";
  const std::string want = renderTable();
  if (const char* u = std::getenv("TSFUSE_UPDATE_DOCS"); u && std::string(u) == "1") {
    std::ofstream(path) << want;
    GTEST_SKIP() << "wrote " << path;
  }
  std::ifstream in(path);
  std::stringstream have;
  have << in.rdbuf();
  EXPECT_EQ(have.str(), want) << path
                              << " is out of date: regenerate it with TSFUSE_UPDATE_DOCS=1 (see the file's test)";
}

}  // namespace

}  // namespace registry_ops_table_test
