// What the registry (kernels/ir/ops.def) says about each expression op, for every layer: the
// parser and validator (names, signatures), the passes (which ATen schemas become which op, the
// dtype facts canonicalization relies on), the analysis (compute dtypes) and the typed lowering
// (each op's rule and primitive). The ATen reference evaluation is in kernels/reference/aten_eval.h.
#pragma once

#include "kernels/ir/expr.h"
#include "kernels/ir/prim.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace tsfuse {

enum OpTrait : uint32_t {
  kFloatValued = 1u << 0,   // its result is always floating
  kNeverBool = 1u << 1,     // its result is never bool
  kInPlace = 1u << 2,       // x.op_(numbers) may become x.op(numbers) (passes/canonicalize.cpp)
  kCompare = 1u << 3,       // computes in its operands' promoted dtype, returns bool
  kLogical = 1u << 4,       // tests its operands for truth (computes in bool), returns bool
  kMayAlias = 1u << 5,      // may return its input itself, not a fresh tensor
  kOpmathScalar = 1u << 6,  // ATen's CUDA kernel reads a Python-number operand in the math type
  // ATen computes the op on a Python number as on that number wrapped in a 0-dim tensor (its
  // Scalar overloads wrap it): a number known only at run time is a tsfuse::wrapped_number operand
  // read as a tensor, one kernel for every value. Without it the op reads a number by value
  // (readsNumberByValue).
  kRuntimeNumber = 1u << 7,
  // Its reference checks its operands' sizes and ranks beyond broadcasting (a cat's or stack's
  // checks), so a view or reshape does not move through it. Its fused form needs nothing more: a
  // call whose stand-ins or real sizes fail the analysis runs the reference, which raises.
  kChecksSizes = 1u << 8,
};

// How the typed lowering computes an op natively (kernels/lower/lower.cpp).
enum class LowerRule : uint8_t {
  Map,
  Relu,
  Clamp,
  Where,
  MaskedFill,
  To,
  Div,
  Reciprocal,
  Square,
  Bitwise,
  Fill,
  Sign,
  Aten
};

// How a TorchScript schema's inputs become the instruction's arguments (passes/analysis/op_table.cpp).
enum class AtenForm : uint8_t { Plain, Alpha, RevAlpha, DivMode, ToDtype, ToDevice, ToOther, Like };

struct OpDef {
  Op op;
  const char* name;
  // per argument: v tensor or number, o the same or None, s number, d dtype, c device, p prototype
  const char* signature;
  uint32_t traits;
  LowerRule rule;
  int primId;  // the Map rule's primitive, -1 for none

  int arity() const;
  bool has(OpTrait t) const { return (traits & t) != 0; }
  std::optional<Prim> prim() const {
    return primId < 0 ? std::nullopt : std::optional<Prim>(static_cast<Prim>(primId));
  }
};

const OpDef& opDef(Op op);

// Whether argument `position` of `op`, when it is a Python number, is read by value: a number
// position ('v', 'o', 's') of an op without kRuntimeNumber (pow, clamp, where, masked_fill), whose
// Scalar overload runs another kernel than its Tensor overload (pow's special exponents, clamp's
// NaN bounds, where's checked conversion) or which has none. A number known only at run time there is still a
// tsfuse::wrapped_number operand; the reference reads it as the number (RefArgs), and the fast
// paths write it into the expression as a literal before they compile it (kernels/runtime/bind_numbers.h).
bool readsNumberByValue(Op op, size_t position);
// Every op, in registry order (the generated tests walk it).
const std::vector<OpDef>& allOps();

struct AtenOverload {
  Op op;
  const char* schema;  // "aten::add.Tensor"
  AtenForm form;
};
const std::vector<AtenOverload>& atenOverloads();

}  // namespace tsfuse
