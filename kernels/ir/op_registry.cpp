#include "kernels/ir/op_registry.h"

#include <c10/util/Exception.h>

#include <cstring>

namespace tsfuse {
namespace {

// The primitive ids by name, so a registry entry can say `Add` or `None`.
struct PrimIds {
#define TSFUSE_PRIM(Id, arity, flags) static constexpr int Id = static_cast<int>(Prim::Id);
#include "kernels/ir/prims.def"
  static constexpr int None = -1;
};

const std::vector<OpDef> kOps = {
#define TSFUSE_OP(Id, text, signature, traits, rule, prim, ...) \
  {Op::Id, text, signature, static_cast<uint32_t>(traits), LowerRule::rule, PrimIds::prim},
#include "kernels/ir/ops.def"
};

const std::vector<AtenOverload> kOverloads = {
#define TSFUSE_ATEN(Id, schema, form) {Op::Id, schema, AtenForm::form},
#include "kernels/ir/ops.def"
};

constexpr const char* kPrimNames[] = {
#define TSFUSE_PRIM(Id, arity, flags) #Id,
#include "kernels/ir/prims.def"
};

}  // namespace

int OpDef::arity() const { return static_cast<int>(std::strlen(signature)); }

const OpDef& opDef(Op op) {
  const size_t i = static_cast<size_t>(op);
  TORCH_CHECK(i < kOps.size() && kOps[i].op == op, "tsfuse: op id ", i, " is not in the registry");
  return kOps[i];
}

bool readsNumberByValue(Op op, size_t position) {
  const OpDef& d = opDef(op);
  if (d.has(kRuntimeNumber) || position >= static_cast<size_t>(d.arity())) return false;
  const char c = d.signature[position];
  return c == 'v' || c == 'o' || c == 's';
}

const std::vector<OpDef>& allOps() { return kOps; }
const std::vector<AtenOverload>& atenOverloads() { return kOverloads; }

const char* opName(Op op) { return opDef(op).name; }

bool opFromName(const std::string& name, Op& out) {
  for (const OpDef& d : kOps) {
    if (name == d.name) {
      out = d.op;
      return true;
    }
  }
  return false;
}

const char* primName(Prim p) { return kPrimNames[static_cast<size_t>(p)]; }

}  // namespace tsfuse
